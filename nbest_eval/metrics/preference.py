"""Preference correlation (Bremerman et al. 2020, section 4): does the model rank the valid
translations the way learners prefer them?

Per prompt, over the deduplicated valid hypotheses: Spearman's rho between model scores and gold
weights, and Pearson's r between model scores and log gold weights (zero weights, whose log is
undefined, are left out of Pearson). Averaged over the prompts where the correlation is defined:
at least 3 pairs, model scores present, neither side constant.
"""

from __future__ import annotations

import math
import warnings
from typing import Dict, Optional

from ..prompt import Judged
from .base import Metric
from .registry import register

MIN_PAIRS = 3
#: model scores beyond this magnitude are rescaled before scipy squares and sums them
LARGE = 1e100


class PreferenceCorrelation(Metric):
    def __init__(self, key: str):
        assert key in ("pref_spearman", "pref_pearson")
        self.key = key
        self.count_name = key + ":n"
        self.stat_names = (key, self.count_name)
        self.mean_of = (key, self.count_name)

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        value = self.correlation(judged)
        if value is None:
            return {self.key: 0.0, self.count_name: 0.0}
        return {self.key: value, self.count_name: 1.0}

    def correlation(self, judged: Judged) -> Optional[float]:
        pairs = [(hyp.score, judged.gold.weights[key]) for key, hyp in judged.unique if key in judged.gold.weights]
        if any(score is None for score, _ in pairs):
            return None
        if self.key == "pref_pearson":
            pairs = [(score, math.log(w)) for score, w in pairs if w > 0]
        if len(pairs) < MIN_PAIRS:
            return None
        scores, weights = zip(*pairs)
        largest = max(abs(s) for s in scores)
        if math.isfinite(largest) and largest > LARGE:  # scipy's sums would overflow; both are scale-free
            scores = tuple(s / largest for s in scores)
        if len(set(scores)) < 2 or len(set(weights)) < 2:
            return None
        from scipy import stats as scipy_stats  # here, not at import: scipy alone costs ~0.5 s

        corr = scipy_stats.spearmanr if self.key == "pref_spearman" else scipy_stats.pearsonr
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = float(corr(scores, weights)[0])
        return None if math.isnan(value) else value


register("pref_spearman", None, "does the model prefer what learners prefer: per-prompt Spearman correlation "
         "of model scores with gold weights, over prompts where it is defined")(
    lambda match, options: PreferenceCorrelation("pref_spearman"))
register("pref_pearson", None, "the same with Pearson's r against log gold weights")(
    lambda match, options: PreferenceCorrelation("pref_pearson"))
