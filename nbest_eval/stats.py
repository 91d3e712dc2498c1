"""Additive sufficient statistics.

Every metric is a function of sums over prompts, so statistics of shards add up to statistics of
the whole: that is what makes multi-worker validation exact. Values are floats (counts stay exact
up to 2**53) so that a flat vector of them can go through any framework's all-reduce.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Sequence


class Stats(Dict[str, float]):
    """A dict of named sums; ``a + b`` adds key-wise (missing keys count as 0)."""

    def __add__(self, other: Mapping[str, float]) -> Stats:
        out = Stats(self)
        for key, value in other.items():
            out[key] = out.get(key, 0.0) + value
        return out

    def __radd__(self, other):
        # lets the built-in sum() start from 0
        if other == 0:
            return Stats(self)
        return NotImplemented

    def to_vector(self, names: Sequence[str]) -> list:
        """The values in a fixed order, for reducers that move flat vectors (torch all_reduce)."""
        return [float(self.get(name, 0.0)) for name in names]

    @classmethod
    def from_vector(cls, names: Sequence[str], values: Iterable[float]) -> Stats:
        return cls(zip(names, (float(v) for v in values)))
