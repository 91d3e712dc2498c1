"""The paired bootstrap (Koehn 2004, as sacrebleu and Moses): the statistic is each resample's
absolute difference less their mean; its draws also give each system's interval."""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from .base import PairedResult, PairedTest, Results, difference, p_value
from .intervals import BOOTSTRAP_RESAMPLES, bootstrap_scores, interval
from .per_prompt import PerPrompt


class PairedBootstrap(PairedTest):
    key = "bs"
    title = "paired bootstrap"
    default_resamples = BOOTSTRAP_RESAMPLES
    gives_intervals = True

    def compare(self, baseline: PerPrompt, systems: Sequence[PerPrompt], observed: Mapping[str, Mapping],
                n_samples: int, seed: Optional[int], keys: Optional[Sequence[str]]) -> Results:
        base, *resampled = bootstrap_scores([baseline, *systems], n_samples, seed, keys)
        return {s.name: _results(base, own, observed[baseline.name], observed[s.name])
                for s, own in zip(systems, resampled)}


def _results(base: Dict[str, np.ndarray], own: Dict[str, np.ndarray], base_scores: Mapping,
             own_scores: Mapping) -> Dict[str, PairedResult]:
    results = {}
    for key, values in own.items():
        observed = difference(base_scores[key], own_scores[key])
        differences = np.abs(values - base[key])
        p = None
        if observed is not None and not np.isnan(differences).any():
            p = p_value(differences - differences.mean(), observed)
        results[key] = PairedResult(own_scores[key], p, interval=interval(values))
    return results
