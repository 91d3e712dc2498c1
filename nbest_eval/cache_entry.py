"""One checkpoint's entry in ``nbest-eval select``'s cache, verifiable from itself.

An entry holds what a re-run needs without re-scoring: the metric values, the per-prompt
statistics (resampled for intervals and tests) and the longest list (the signature's ``nbest``).
A re-run reports what it finds, so :meth:`CacheEntry.verified` checks each entry when it is read:

- its shape is the scorer's: one row per gold prompt, one number per statistic;
- its numbers are bounded: finite, integers where they count, none beyond 2**53 (floats count
  exactly up to there, and a resample's sums of them stay finite);
- its counts agree: each row is one prompt (``n_prompts`` 1), relevant exactly where the gold prompt
  has a valid translation, empty exactly where it has no hypothesis; the longest list is the largest
  ``n_hyps``;
- its values are what the metrics compute from its statistics (summed as the scorer sums them).

An entry that fails is re-scored (:class:`~nbest_eval.checkpoint_files.ScoreCache` warns, naming the
checkpoint and the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .data import Gold
from .metrics import N_EMPTY, N_HYPS, N_PROMPTS, N_REL
from .scorer import Scored, Scorer
from .stats import Stats

#: the largest statistic an entry may hold (floats count exactly up to it)
BOUND = float(2 ** 53)
_FIELDS = ("values", "stats", "nbest_size")


@dataclass(frozen=True)
class CacheEntry:
    values: Dict[str, Optional[float]]
    stats: List[List[float]]
    nbest_size: int

    @classmethod
    def of(cls, scored: Scored, scorer: Scorer) -> CacheEntry:
        """What the cache keeps of a checkpoint scored with ``keep_per_prompt``."""
        return cls(dict(scored.values), [s.to_vector(scorer.stat_names) for _, s in scored.per_prompt],
                   scored.nbest_size)

    def as_json(self) -> Dict[str, Any]:
        return {"values": self.values, "stats": self.stats, "nbest_size": self.nbest_size}

    @classmethod
    def verified(cls, raw: Any, scorer: Scorer, relevant: Sequence[bool]) -> CacheEntry:
        """``raw`` (an entry as read) once it passes every check of the module's list, for ``scorer``
        and a gold whose prompts are ``relevant`` (have a valid translation); ValueError saying the
        first check it fails otherwise."""
        if not isinstance(raw, dict) or sorted(raw) != sorted(_FIELDS):
            raise ValueError(f"not an object of {', '.join(_FIELDS)}")
        values, stats, size = raw["values"], raw["stats"], raw["nbest_size"]
        names = scorer.stat_names
        if not isinstance(stats, list) or len(stats) != len(relevant):
            raise ValueError(f"not {len(relevant)} rows of statistics, one per gold prompt")
        where = {name: i for i, name in enumerate(names)}
        for number, (row, has_valid) in enumerate(zip(stats, relevant), 1):
            if not isinstance(row, list) or len(row) != len(names) or not all(map(_bounded, row)):
                raise ValueError(f"prompt {number}: not {len(names)} finite numbers within +-2**53")
            prompts, rel, empty, hyps = (row[where[n]] for n in (N_PROMPTS, N_REL, N_EMPTY, N_HYPS))
            if prompts != 1 or rel != float(has_valid) or hyps < 0 or hyps != int(hyps) or empty != float(hyps == 0):
                raise ValueError(f"prompt {number}: its counts (n_prompts, n_rel, n_empty, n_hyps) are not one "
                                 f"prompt's of this gold")
        longest = max((int(row[where[N_HYPS]]) for row in stats), default=0)
        if not _integer(size) or size != longest:
            raise ValueError(f"nbest_size {size!r:.40} is not the longest list, {longest}")
        expected = scorer.values(sum((Stats.from_vector(names, row) for row in stats), scorer.zero()))
        if not isinstance(values, dict) or sorted(values) != sorted(expected):
            raise ValueError(f"its values are not those of {', '.join(expected)}")
        for key, value in expected.items():
            if not _same(values[key], value):
                raise ValueError(f"its {key} {values[key]!r:.40} is not what its statistics give ({value!r})")
        return cls(dict(values), [[float(v) for v in row] for row in stats], size)


def relevance(scorer: Scorer, gold: Gold) -> List[bool]:
    """Which gold prompts have a valid translation (each row's ``n_rel``)."""
    return [scorer.prompt_stats(prompt, [])[N_REL] > 0 for prompt in gold]


def _bounded(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
        abs(value) <= BOUND


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(found: Any, expected: Optional[float]) -> bool:
    if expected is None or found is None:
        return found is None and expected is None
    return _bounded(found) and math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12)
