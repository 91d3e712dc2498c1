"""How sure a score is: bootstrap confidence intervals and paired significance tests over prompts.

The unit of resampling is the prompt: a prompt's hypotheses and references move together. Every
measure is a function of summed per-prompt statistics, so a resample is a weighted sum of the rows
of a (prompts x statistics) matrix: all resamples' sums are one matrix product (draw counts times
statistics), and the metrics' own value functions turn them into scores. Nothing is re-scored.

The conventions are sacrebleu's (``sacrebleu/significance.py``), so that for ``bleu_1x1``, where a
prompt is one segment, intervals and p-values are sacrebleu's (not AR's optional intervals, which
sacrebleu draws from the generator after its swaps):

- seed 12345; bootstrap draws ``numpy.random.default_rng(seed).choice(n, (samples, n))``, the
  approximate-randomization swaps ``default_rng(seed).integers(2, (trials, n), dtype=bool)``, the
  same draws for every system, so that tests are paired;
- an interval is the mean of the resampled scores and the 2.5% / 97.5% resamples (sorted, index
  ``samples // 40`` from either end); sacrebleu reports ``mean +- (high - low) / 2``;
- a p-value is ``(c + 1) / (N + 1)``, c the resamples whose statistic exceeds the observed absolute
  difference: for the paired bootstrap the statistic is each resample's absolute difference less
  their mean (Koehn 2004, as sacrebleu and Moses), for AR the absolute difference of the shuffled
  pseudo-systems (Riezler and Maxwell 2005). One exception: systems with the same score get p = 1
  (sacrebleu's strict count gives two identical systems its smallest p-value).

A paired t-test (``t``) on the per-prompt values of a mean (AP for MAP) is ``scipy.stats.ttest_rel``
over the prompts that the measure averages over. Holm's step-down correction controls the
family-wise error over several systems compared with one baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..data import InputError
from ..scorer import Scorer
from ..stats import Stats
from .resampling import ar_chunks, bootstrap_chunks, check_memory, gathered

DEFAULT_SEED = 12345
#: resamples (bootstrap) or trials (approximate randomization) when none are given, as sacrebleu
DEFAULT_SAMPLES = {"bs": 1000, "ar": 10000, "t": 0}
TESTS = tuple(DEFAULT_SAMPLES)
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Interval:
    """A bootstrap 95% confidence interval: the resamples' mean and their 2.5% and 97.5% values."""

    mean: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """sacrebleu's ``ci``: what it prints after ``mean +-``."""
        return 0.5 * (self.high - self.low)

    def as_dict(self) -> Dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class PairedResult:
    """A system against the baseline on one measure: its score, the p-value of the difference (None
    where the test does not apply), Holm's adjusted p-value, and (paired bootstrap) its interval."""

    score: Optional[float]
    p_value: Optional[float]
    p_holm: Optional[float] = None
    interval: Optional[Interval] = None

    def as_dict(self) -> Dict:
        return {"score": self.score, "p_value": self.p_value, "p_holm": self.p_holm,
                "ci": self.interval.as_dict() if self.interval else None}


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


def resamples_for(comparisons: int, test: str = "bs", alpha: float = DEFAULT_ALPHA) -> int:
    """Resamples (or trials) enough for Holm's correction over ``comparisons`` tests at ``alpha``:
    the test's default, or more, so that the smallest p-value resampling can give, 1 / (N + 1), is a
    tenth of Holm's smallest threshold, alpha / comparisons (in thousands). With 1,000 resamples and
    50 or more comparisons nothing could ever be told apart."""
    if test == "t":
        return 0
    needed = 10 * comparisons / alpha
    if not math.isfinite(needed):  # a subnormal alpha
        raise InputError(f"alpha {alpha} over {comparisons} comparisons would need infinitely many resamples")
    return max(DEFAULT_SAMPLES[test], 1000 * math.ceil(math.ceil(needed) / 1000))


def resolution_note(comparisons: int, n_samples: int, alpha: float = DEFAULT_ALPHA) -> Optional[str]:
    """A warning where ``n_samples`` resamples cannot give a Holm-corrected p-value below ``alpha``."""
    smallest = min(1.0, comparisons / (n_samples + 1))
    if smallest < alpha:
        return None
    return (f"with {n_samples} resamples the smallest Holm-corrected p-value over {comparisons} comparisons is "
            f"{smallest:.3f}, not below {alpha}: no difference can be significant; use --n-samples "
            f"{resamples_for(comparisons, 'bs', alpha)} or more")


def interval_note(n_samples: int) -> Optional[str]:
    """A warning where ``n_samples`` bootstrap resamples are too few for a 95% interval: below 40,
    its 2.5% and 97.5% resamples are the lowest and the highest."""
    if n_samples >= 40:
        return None
    return (f"with {n_samples} resamples a 95% interval is just the range of the resamples (its 2.5% and 97.5% "
            f"points need at least 40); use --n-samples 1000")


def bootstrap_draws(n_prompts: int, n_samples: int = DEFAULT_SAMPLES["bs"], seed: Optional[int] = DEFAULT_SEED
                    ) -> np.ndarray:
    """(samples x prompts) counts: how often each prompt is drawn in each resample (sacrebleu's
    draws), all in memory (the tests here resample in chunks instead: :mod:`nbest_eval.significance.resampling`)."""
    check_memory(n_samples, n_prompts, "bootstrap_draws")
    return np.concatenate(list(bootstrap_chunks(n_prompts, n_samples, seed)))


def ar_swaps(n_prompts: int, n_trials: int = DEFAULT_SAMPLES["ar"], seed: Optional[int] = DEFAULT_SEED
             ) -> np.ndarray:
    """(trials x prompts) booleans: True where a trial swaps the two systems' outputs (sacrebleu's
    draws), all in memory."""
    check_memory(n_trials, n_prompts, "ar_swaps")
    return np.concatenate(list(ar_chunks(n_prompts, n_trials, seed)))


def bootstrap_scores(systems: Sequence[PerPrompt], n_samples: int = DEFAULT_SAMPLES["bs"],
                     seed: Optional[int] = DEFAULT_SEED, keys: Optional[Sequence[str]] = None
                     ) -> List[Dict[str, np.ndarray]]:
    """Each system's score on every measure (or each of ``keys``) in each of sacrebleu's bootstrap
    resamples (the same draws for all: they must share their prompts), drawn in bounded chunks."""
    count = len(keys) if keys is not None else len(systems[0].scorer.keys)
    _check_resampling(n_samples, seed)
    check_memory(n_samples, len(systems) * count)
    return gathered(bootstrap_chunks(len(systems[0]), n_samples, seed),
                    lambda counts: [system.resampled(counts, keys) for system in systems])


def interval(resampled: np.ndarray) -> Optional[Interval]:
    """sacrebleu's ``estimate_ci`` over the resamples where the measure is defined (None if none is)."""
    scores = np.sort(resampled[~np.isnan(resampled)])
    if not len(scores):
        return None
    lower = len(scores) // 40
    return Interval(float(scores.mean()), float(scores[lower]), float(scores[len(scores) - lower - 1]))


def confidence_intervals(system: PerPrompt, n_samples: int = DEFAULT_SAMPLES["bs"],
                         seed: Optional[int] = DEFAULT_SEED, keys: Optional[Sequence[str]] = None,
                         draws: Optional[np.ndarray] = None) -> Dict[str, Optional[Interval]]:
    """Every measure's (or each of ``keys``') bootstrap 95% interval (``nbest-eval score
    --confidence``); ``draws``: :func:`bootstrap_draws` already made for these prompts."""
    check_systems(system, [], keys)
    resampled = bootstrap_scores([system], n_samples, seed, keys)[0] if draws is None else \
        system.resampled(draws, keys)
    return {key: interval(values) for key, values in resampled.items()}


def p_value(statistics: np.ndarray, observed: float) -> float:
    """sacrebleu's ``_compute_p_value``: (c + 1) / (N + 1), c the statistics strictly above ``observed``;
    but 1 where the systems score the same: sacrebleu's strict count gives a system compared with
    itself (every statistic 0) its smallest p-value, 1 / (N + 1), where there is no difference at all."""
    if observed == 0:
        return 1.0
    return (int(np.sum(statistics > observed)) + 1) / (len(statistics) + 1)


def paired_test(baseline: PerPrompt, systems: Sequence[PerPrompt], test: str = "bs",
                n_samples: Optional[int] = None, seed: Optional[int] = DEFAULT_SEED,
                keys: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, PairedResult]]:
    """Each system against ``baseline`` on every measure (or each of ``keys``): system name -> measure
    -> result, with Holm's correction across the systems. All systems must cover the baseline's
    prompts, in order."""
    if test not in TESTS:
        raise InputError(f"unknown paired test {test!r}; use one of: {', '.join(TESTS)}")
    check_systems(baseline, systems, keys)
    names = [s.name for s in [baseline, *systems]]
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:  # results are keyed by name
        raise InputError(f"two systems are named {repeated!r}; paired systems need distinct names")
    for system in systems:
        check_paired(baseline, system)
    n_samples = DEFAULT_SAMPLES[test] if n_samples is None else n_samples
    if test != "t":
        _check_resampling(n_samples, seed)
    observed = {s.name: s.scores() for s in [baseline, *systems]}
    if test == "bs":
        base, *resampled = bootstrap_scores([baseline, *systems], n_samples, seed, keys)
        raw = {s.name: _bootstrap_results(base, own, observed[baseline.name], observed[s.name])
               for s, own in zip(systems, resampled)}
    elif test == "ar":
        check_memory(n_samples, len(systems) * len(keys if keys is not None else baseline.scorer.keys))
        differences = gathered(ar_chunks(len(baseline), n_samples, seed),
                               lambda swaps: [_ar_differences(baseline, s, swaps.astype(float), keys) for s in systems])
        raw = {s.name: _ar_results(found, observed[baseline.name], observed[s.name])
               for s, found in zip(systems, differences)}
    else:
        raw = {s.name: _t_results(baseline, s, observed[s.name], keys or baseline.scorer.keys) for s in systems}
    return _with_holm(raw)


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


def _check_resampling(n_samples: Any, seed: Any) -> None:
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise InputError(f"the number of resamples must be an integer >= 1, got {n_samples!r:.60}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise InputError(f"the seed must be an integer >= 0 or None, got {seed!r:.60}")


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


def _difference(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else abs(a - b)


def _bootstrap_results(base: Dict[str, np.ndarray], own: Dict[str, np.ndarray], base_scores: Mapping,
                       own_scores: Mapping) -> Dict[str, PairedResult]:
    results = {}
    for key, values in own.items():
        observed = _difference(base_scores[key], own_scores[key])
        differences = np.abs(values - base[key])
        defined = ~np.isnan(differences)
        p = None
        if observed is not None and defined.all():
            p = p_value(differences - differences.mean(), observed)
        results[key] = PairedResult(own_scores[key], p, interval=interval(values))
    return results


def _ar_differences(baseline: PerPrompt, system: PerPrompt, swaps: np.ndarray, keys: Optional[Sequence[str]]
                    ) -> Dict[str, np.ndarray]:
    """Each measure's absolute difference of the two pseudo-systems of each trial in ``swaps``."""
    # a trial's pseudo-systems: the baseline with the swapped prompts' rows moved over from the system,
    # and the system with them moved back; one product gives what every trial moves
    moved = swaps @ (system.matrix - baseline.matrix)
    shuffled_a = baseline.scores_of(baseline.matrix.sum(0) + moved, keys)
    shuffled_b = baseline.scores_of(system.matrix.sum(0) - moved, keys)
    return {key: np.abs(shuffled_a[key] - shuffled_b[key]) for key in shuffled_a}


def _ar_results(differences: Dict[str, np.ndarray], base_scores: Mapping, own_scores: Mapping
                ) -> Dict[str, PairedResult]:
    results = {}
    for key, found in differences.items():
        observed = _difference(base_scores[key], own_scores[key])
        p = p_value(found, observed) if observed is not None and not np.isnan(found).any() else None
        results[key] = PairedResult(own_scores[key], p)
    return results


def _t_results(baseline: PerPrompt, system: PerPrompt, own_scores: Mapping, keys: Sequence[str]
               ) -> Dict[str, PairedResult]:
    from scipy import stats as scipy_stats  # here, not at import: scipy alone costs ~0.5 s

    results = {}
    for key in keys:
        own, base = system.per_prompt_values(key), baseline.per_prompt_values(key)
        p = None
        if own is not None:
            counted = own[1] & base[1]  # the same prompts on both sides (preference: defined for both)
            if counted.sum() >= 2 and np.array_equal(own[0][counted], base[0][counted]):
                p = 1.0  # no difference at all (scipy's is nan), as for the resampling tests
            elif counted.sum() >= 2:
                statistic = scipy_stats.ttest_rel(own[0][counted], base[0][counted])
                p = None if math.isnan(statistic.pvalue) else float(statistic.pvalue)
        results[key] = PairedResult(own_scores[key], p)
    return results


def holm(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's step-down adjusted p-values (None stays None and is not counted among the tests)."""
    bad = next((p for p in p_values if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))
                                                          or not 0 <= p <= 1)), None)
    if bad is not None:
        raise InputError(f"a p-value must be a number in [0, 1] or None, got {bad!r:.60}")
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        adjusted[i] = running
    return adjusted


def _with_holm(raw: Dict[str, Dict[str, PairedResult]]) -> Dict[str, Dict[str, PairedResult]]:
    names = list(raw)
    keys = list(next(iter(raw.values()), {}))
    out: Dict[str, Dict[str, PairedResult]] = {name: {} for name in names}
    for key in keys:
        adjusted = holm([raw[name][key].p_value for name in names])
        for name, p_holm in zip(names, adjusted):
            result = raw[name][key]
            out[name][key] = PairedResult(result.score, result.p_value, p_holm, result.interval)
    return out

