"""A paired t-test on the per-prompt values of a mean (AP for MAP): ``scipy.stats.ttest_rel`` over
the prompts that the measure averages over on both sides."""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

from .base import PairedResult, PairedTest, Results
from .per_prompt import PerPrompt


class PairedTTest(PairedTest):
    key = "t"
    title = "paired t-test"
    needs_mean = True

    def describe(self, n_samples: int, seed: Optional[int]) -> str:
        return f"{self.title} on per-prompt values"

    def compare(self, baseline: PerPrompt, systems: Sequence[PerPrompt], observed: Mapping[str, Mapping],
                n_samples: int, seed: Optional[int], keys: Optional[Sequence[str]]) -> Results:
        keys = keys or baseline.scorer.keys
        return {s.name: {key: PairedResult(observed[s.name][key], _p_value(baseline, s, key)) for key in keys}
                for s in systems}


def _p_value(baseline: PerPrompt, system: PerPrompt, key: str) -> Optional[float]:
    """None where ``key`` is no mean or fewer than two prompts count on both sides."""
    from scipy import stats as scipy_stats  # here, not at import: scipy is slow to import

    own, base = system.per_prompt_values(key), baseline.per_prompt_values(key)
    if own is None:
        return None
    counted = own[1] & base[1]  # the same prompts on both sides (preference: defined for both)
    if counted.sum() < 2:
        return None
    if np.array_equal(own[0][counted], base[0][counted]):
        return 1.0  # no difference at all (scipy's is nan), as for the resampling tests
    statistic = scipy_stats.ttest_rel(own[0][counted], base[0][counted])
    return None if math.isnan(statistic.pvalue) else float(statistic.pvalue)
