"""What a paired significance test is to its callers: one object per test (sacrebleu's
``PairedTest``, ranx's one test per file) with its key, title, default resamples and ``run``, so
that no caller branches on the kind of test (the tests: :mod:`.bootstrap`, :mod:`.randomization`,
:mod:`.t_test`; their table: :mod:`.paired`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from ..data import InputError
from .holm import holm
from .intervals import Interval
from .per_prompt import PerPrompt, check_paired, check_resampling, check_systems

#: system name -> measure key -> result
Results = Dict[str, Dict[str, "PairedResult"]]


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


class PairedTest:
    """One paired test of systems against a baseline over the same prompts. A subclass sets the
    class attributes and :meth:`compare`; :meth:`run` checks the input and applies Holm."""

    #: the spelling of ``--paired`` and of the signature
    key: str
    #: the display name
    title: str
    #: resamples (or trials) when none are given; 0: the test does not resample
    default_resamples: int = 0
    #: what its resamples are called in messages
    unit: str = "resamples"
    #: whether it compares per-prompt values, which only a mean over prompts has (AP for MAP)
    needs_mean: bool = False
    #: whether its own draws are the bootstrap's, so that they give each system's interval
    gives_intervals: bool = False

    @property
    def resamples(self) -> bool:
        """Whether the test resamples (and so has resamples and a seed to report)."""
        return self.default_resamples > 0

    def n_samples(self, given: Optional[int] = None) -> int:
        """The resamples the test makes: ``given``, or its default where None; 0 where it does not resample."""
        if not self.resamples:
            return 0
        return self.default_resamples if given is None else given

    def describe(self, n_samples: int, seed: Optional[int]) -> str:
        """The test as a report's heading names it."""
        return f"{self.title}, {n_samples} {self.unit}, seed {seed}"

    def run(self, baseline: PerPrompt, systems: Sequence[PerPrompt], n_samples: Optional[int] = None,
            seed: Optional[int] = None, keys: Optional[Sequence[str]] = None) -> Results:
        """Each system against ``baseline`` on every measure (or each of ``keys``): system name ->
        measure -> result, with Holm's correction across the systems. All systems must cover the
        baseline's prompts, in order."""
        check_systems(baseline, systems, keys)
        names = [s.name for s in [baseline, *systems]]
        repeated = next((n for n in names if names.count(n) > 1), None)
        if repeated is not None:  # results are keyed by name
            raise InputError(f"two systems are named {repeated!r}; paired systems need distinct names")
        for system in systems:
            check_paired(baseline, system)
        n_samples = self.n_samples(n_samples)
        if self.resamples:
            check_resampling(n_samples, seed)
        observed = {s.name: s.scores() for s in [baseline, *systems]}
        return _with_holm(self.compare(baseline, systems, observed, n_samples, seed, keys))

    def compare(self, baseline: PerPrompt, systems: Sequence[PerPrompt], observed: Mapping[str, Mapping],
                n_samples: int, seed: Optional[int], keys: Optional[Sequence[str]]) -> Results:
        """The unadjusted results; ``observed``: each system's scores by name."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key!r})"


def difference(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """The observed absolute difference of two scores, None where either is undefined."""
    return None if a is None or b is None else abs(a - b)


def p_value(statistics: np.ndarray, observed: float) -> float:
    """sacrebleu's ``_compute_p_value``: (c + 1) / (N + 1), c the statistics strictly above ``observed``;
    but 1 where the systems score the same: sacrebleu's strict count gives a system compared with
    itself (every statistic 0) its smallest p-value, 1 / (N + 1), where there is no difference at all."""
    if observed == 0:
        return 1.0
    return (int(np.sum(statistics > observed)) + 1) / (len(statistics) + 1)


def _with_holm(raw: Dict[str, Dict[str, PairedResult]]) -> Dict[str, Dict[str, PairedResult]]:
    """``raw`` (system name -> measure -> result) with each measure's p-values Holm-corrected across
    the systems."""
    names = list(raw)
    keys = list(next(iter(raw.values()), {}))
    out: Dict[str, Dict[str, PairedResult]] = {name: {} for name in names}
    for key in keys:
        adjusted = holm([raw[name][key].p_value for name in names])
        for name, p_holm in zip(names, adjusted):
            result = raw[name][key]
            out[name][key] = PairedResult(result.score, result.p_value, p_holm, result.interval)
    return out
