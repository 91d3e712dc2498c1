"""One system's per-prompt statistics, the unit every interval and paired test resamples, and the
checks that what the API's significance functions are given can be resampled and paired."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ..data import InputError
from ..scorer import Scorer
from ..stats import Stats


class PerPrompt:
    """One system's per-prompt statistics as a (prompts x statistics) matrix, rows in the gold's order.

    ``rows``: (prompt id, :class:`Stats`) pairs, as :attr:`Scored.per_prompt` holds them.
    """

    def __init__(self, scorer: Scorer, rows: Sequence[Tuple[str, Stats]], name: str = "system"):
        self.scorer, self.name = scorer, name
        self.ids = [pid for pid, _ in rows]
        if not self.ids:
            raise InputError(f"{name}: no prompt to resample")
        self.matrix = np.array([stats.to_vector(scorer.stat_names) for _, stats in rows], dtype=float)

    @classmethod
    def from_matrix(cls, scorer: Scorer, ids: Sequence[str], matrix: np.ndarray, name: str = "system") -> PerPrompt:
        """From a matrix already laid out in ``scorer.stat_names`` order (a cache's copy)."""
        self = cls.__new__(cls)
        self.scorer, self.name, self.ids, self.matrix = scorer, name, list(ids), np.asarray(matrix, dtype=float)
        return self

    @classmethod
    def placed(cls, scorer: Scorer, ids: Sequence[str], rows: Sequence[Tuple[str, Stats]]) -> PerPrompt:
        """``rows`` ((prompt id, :class:`Stats`) pairs) at their ids' places among ``ids``, zeros for
        the others: one worker's share of a validation, which summed over the workers is the whole."""
        where = {pid: i for i, pid in enumerate(ids)}
        matrix = np.zeros((len(where), len(scorer.stat_names)))
        for pid, stats in rows:
            matrix[where[pid]] += stats.to_vector(scorer.stat_names)
        return cls.from_matrix(scorer, ids, matrix)

    def __len__(self) -> int:
        return len(self.ids)

    def totals(self) -> Stats:
        """The summed statistics, added in prompt order as the scorer adds them."""
        return sum((Stats.from_vector(self.scorer.stat_names, row) for row in self.matrix.tolist()),
                   self.scorer.zero())

    def scores(self) -> Dict[str, Optional[float]]:
        return self.scorer.values(self.totals())

    def resampled(self, weights: np.ndarray, keys: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Each measure's (or each of ``keys``') score under each row of ``weights`` (resamples x
        prompts: how often each prompt is drawn, or 0/1 selections), nan where undefined."""
        return self.scores_of(weights @ self.matrix, keys)

    def scores_of(self, sums: np.ndarray, keys: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Each measure's score of each row of ``sums`` (rows laid out as the matrix's)."""
        columns = {name: sums[:, i] for i, name in enumerate(self.scorer.stat_names)}
        return {m.key: m.values(columns) for m in self.scorer.metrics if keys is None or m.key in keys}

    def per_prompt_values(self, key: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(per-prompt values, whether each prompt is averaged over) of a mean measure; None for others."""
        metric = self.scorer.metrics[self.scorer.keys.index(key)]
        if metric.mean_of is None:
            return None
        total, count = (self.matrix[:, self.scorer.stat_names.index(n)] for n in metric.mean_of)
        return total, count != 0


def check_systems(baseline: Any, systems: Any, keys: Any = None) -> None:
    """What the API's significance functions take, said as an InputError rather than found as a numpy
    error: :class:`PerPrompt` systems (``systems`` a list of them) scored with one scorer's measures
    and options, and ``keys`` (None: all) a list of that scorer's measure keys."""
    if not isinstance(baseline, PerPrompt):
        raise InputError(f"a system must be a PerPrompt (per-prompt statistics), got {type(baseline).__name__}")
    if isinstance(systems, (PerPrompt, str)) or not isinstance(systems, Sequence):
        raise InputError(f"systems must be a list of PerPrompt, got {type(systems).__name__}")
    for system in systems:
        if not isinstance(system, PerPrompt):
            raise InputError(f"a system must be a PerPrompt (per-prompt statistics), got {type(system).__name__}")
        if _measures(system.scorer) != _measures(baseline.scorer):
            raise InputError(f"{system.name} and {baseline.name} were scored with different measures or options; "
                             f"paired systems need one scorer's statistics")
    if keys is None:
        return
    if isinstance(keys, str) or not isinstance(keys, Sequence) or not keys:
        raise InputError(f"keys must be a non-empty list of measure keys, got {keys!r:.60}")
    unknown = [key for key in keys if key not in baseline.scorer.keys]
    if unknown:
        raise InputError(f"unknown measure {unknown[0]!r:.60}; the systems are scored on: "
                         f"{', '.join(baseline.scorer.keys)}")


def _measures(scorer: Scorer) -> Tuple:
    return tuple(scorer.stat_names), tuple((m.key, tuple(sorted(m.options.items()))) for m in scorer.metrics)


def check_paired(baseline: PerPrompt, system: PerPrompt) -> None:
    """Pairing needs the same prompts in the same order; say which differ."""
    if system.ids == baseline.ids:
        return
    own, base = set(system.ids), set(baseline.ids)
    missing = [pid for pid in baseline.ids if pid not in own]
    extra = [pid for pid in system.ids if pid not in base]
    if missing or extra:
        detail = (f"{len(missing)} of {baseline.name}'s prompts are missing (the first: {missing[0]})" if missing
                  else f"it has {len(extra)} prompt(s) that {baseline.name} lacks (the first: {extra[0]})")
        raise InputError(f"{system.name} cannot be paired with {baseline.name}: {detail}")
    raise InputError(f"{system.name} cannot be paired with {baseline.name}: the prompts are in another order")


def check_resampling(n_samples: Any, seed: Any) -> None:
    """A resample count (an integer >= 1) and a seed (an integer >= 0, or None) as the API takes them."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise InputError(f"the number of resamples must be an integer >= 1, got {n_samples!r:.60}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise InputError(f"the seed must be an integer >= 0 or None, got {seed!r:.60}")
