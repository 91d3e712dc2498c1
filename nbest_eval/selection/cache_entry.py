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
- each row's statistics are what one prompt's list can give (:func:`row_checks`): a mean measure's
  value within its range (a proportion in [0, 1], a correlation in [-1, 1]) where it is counted, 0
  where not, counted once at most; counts whole and not negative; BLEU's n-gram counts whole, matches
  at most the n-grams, the unigrams the length; an AP (``map``) at most min(k, R) / R, k the list's
  length and R the gold prompt's valid translations;
- its values are what the metrics compute from its statistics (summed as the scorer sums them).

What no check of an entry alone can tell is whether its numbers are those of the checkpoint they
are cached for: :class:`~nbest_eval.selection.checkpoint_files.ScoreCache` binds each entry to the content it
scored, and an entry made up to pass every check here and bound to a file's digest is only caught
by scoring the file again. An entry that fails is re-scored (the cache warns, naming the checkpoint
and the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ..data import Gold
from ..metrics import N_EMPTY, N_HYPS, N_PROMPTS, N_REL, Metric, PromptMean
from ..metrics.bleu import XYBleu
from ..metrics.counts import Count
from ..metrics.preference import PreferenceCorrelation
from ..metrics.user import UserMeasure
from ..scorer import Scored, Scorer
from ..stats import Stats

#: the largest statistic an entry may hold (floats count exactly up to it)
BOUND = float(2 ** 53)
_FIELDS = ("values", "stats", "nbest_size")
#: one prompt's value of a mean measure, by the measure's class: the registry's means are proportions
#: (AP, precision, recall, F, nDCG, RBP', iprec, the user-oriented ratios), but for the correlations
PROMPT_RANGE = {PromptMean: (0.0, 1.0), UserMeasure: (0.0, 1.0), PreferenceCorrelation: (-1.0, 1.0)}
#: how far beyond its range floating-point rounding may carry a computed value
SLACK = 1e-9
#: a test of one prompt's statistics (by name): what is wrong with them, or None
RowCheck = Callable[[Mapping[str, float]], Optional[str]]


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
    def verified(cls, raw: Any, scorer: Scorer, relevant: Sequence[int]) -> CacheEntry:
        """``raw`` (an entry as read) once it passes every check of the module's list, for ``scorer``
        and a gold whose prompts have ``relevant`` valid translations each (:func:`relevance`; a
        bool: whether it has any); ValueError saying the first check it fails otherwise."""
        if not isinstance(raw, dict) or sorted(raw) != sorted(_FIELDS):
            raise ValueError(f"not an object of {', '.join(_FIELDS)}")
        values, stats, size = raw["values"], raw["stats"], raw["nbest_size"]
        names = scorer.stat_names
        if not isinstance(stats, list) or len(stats) != len(relevant):
            raise ValueError(f"not {len(relevant)} rows of statistics, one per gold prompt")
        checks = row_checks(scorer)
        for number, (row, valid) in enumerate(zip(stats, relevant), 1):
            if not isinstance(row, list) or len(row) != len(names) or not all(map(_bounded, row)):
                raise ValueError(f"prompt {number}: not {len(names)} finite numbers within +-2**53")
            named = dict(zip(names, row))
            prompts, rel, empty, hyps = (named[n] for n in (N_PROMPTS, N_REL, N_EMPTY, N_HYPS))
            if prompts != 1 or rel != float(valid > 0) or hyps < 0 or hyps != int(hyps) or empty != float(hyps == 0):
                raise ValueError(f"prompt {number}: its counts (n_prompts, n_rel, n_empty, n_hyps) are not one "
                                 f"prompt's of this gold")
            for key, check in checks.items():
                wrong = check(named)
                if wrong:
                    raise ValueError(f"prompt {number}: its {key} statistics are not one prompt's ({wrong})")
            if "map" in named and valid and named["map"] > min(hyps, valid) / valid + SLACK:
                raise ValueError(f"prompt {number}: its map {named['map']:g} is above what {hyps:g} hypotheses can "
                                 f"reach with {valid:d} valid translations, min({hyps:g}, {valid:d}) / {valid:d}")
        where = {name: i for i, name in enumerate(names)}
        longest = max((int(row[where[N_HYPS]]) for row in stats), default=0)
        if not _integer(size) or size != longest:
            # read_cache reads an integer of over 40 digits as infinite
            shown = "of over 40 digits (or Infinity)" if size in (math.inf, -math.inf) else f"{size!r:.40}"
            raise ValueError(f"nbest_size {shown} is not the longest list, {longest}")
        expected = scorer.values(sum((Stats.from_vector(names, row) for row in stats), scorer.zero()))
        if not isinstance(values, dict) or sorted(values) != sorted(expected):
            raise ValueError(f"its values are not those of {', '.join(expected)}")
        for key, value in expected.items():
            if not _same(values[key], value):
                raise ValueError(f"its {key} {values[key]!r:.40} is not what its statistics give ({value!r})")
        return cls(dict(values), [[float(v) for v in row] for row in stats], size)


def row_checks(scorer: Scorer) -> Dict[str, RowCheck]:
    """Each measure's test of one prompt's statistics, by key (see the module's list)."""
    return {metric.key: _row_check(metric) for metric in scorer.metrics}


def _row_check(metric: Metric) -> RowCheck:
    if isinstance(metric, XYBleu):
        return _bleu_check(metric.stat_names)
    if isinstance(metric, Count):
        return lambda row: _count_wrong(row[metric.key], row[N_REL])
    kind = next((k for k in PROMPT_RANGE if isinstance(metric, k)), None)
    if kind is None or metric.mean_of is None:  # a measure of a new kind: its entries are never trusted
        return lambda row: f"no range is known for {type(metric).__name__} measures; add it to PROMPT_RANGE"
    low, high = PROMPT_RANGE[kind]
    total, count = metric.mean_of

    def check(row: Mapping[str, float]) -> Optional[str]:
        if row[count] not in (0.0, 1.0):
            return f"counted {row[count]!r:.20} times, not 0 or 1"
        if row[count] == 0.0:
            return None if row[total] == 0.0 else f"a value {row[total]!r:.20} where it is not counted"
        inside = low - SLACK <= row[total] <= high + SLACK
        return None if inside else f"a value {row[total]!r:.20} outside [{low:g}, {high:g}]"
    return check


def _count_wrong(value: float, relevant: float) -> Optional[str]:
    """A count's (trec_eval's, over the prompts with a valid translation): whole, not negative, 0 elsewhere."""
    if value < 0 or value != int(value):
        return f"a count of {value!r:.20}"
    return f"a count of {value:g} at a prompt without valid translations" if value and not relevant else None


def _bleu_check(names: Sequence[str]) -> RowCheck:
    """BLEU's segment statistics [sys_len, ref_len, correct_1..N, total_1..N]: counts, the matches at
    most the n-grams, the unigrams the hypotheses' length, fewer n-grams as n grows."""
    order = (len(names) - 2) // 2
    correct, total = names[2:2 + order], names[2 + order:]

    def check(row: Mapping[str, float]) -> Optional[str]:
        wrong = next(filter(None, (_count_wrong(row[n], 1.0) for n in names)), None)
        if wrong:
            return wrong
        if row[total[0]] != row[names[0]]:
            return f"{row[total[0]]:g} unigrams in a length of {row[names[0]]:g}"
        if any(row[c] > row[t] for c, t in zip(correct, total)):
            return "more n-gram matches than n-grams"
        return None if all(row[a] >= row[b] for a, b in zip(total, total[1:])) else "more n-grams of a higher order"
    return check


def relevance(scorer: Scorer, gold: Gold) -> List[int]:
    """Each gold prompt's number of valid translations, R (a row's ``n_rel`` is whether R > 0): an AP
    is at most min(k, R) / R with k hypotheses (at most k of them valid, each at precision 1 at most)."""
    return [scorer.prompt_gold(prompt).num_valid for prompt in gold]


def _bounded(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
        abs(value) <= BOUND


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(found: Any, expected: Optional[float]) -> bool:
    if expected is None or found is None:
        return found is None and expected is None
    return _bounded(found) and math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12)
