"""Approximate randomization (Riezler and Maxwell 2005, as sacrebleu): the statistic is the
absolute difference of two pseudo-systems made by swapping the systems' outputs on random prompts."""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from .base import PairedResult, PairedTest, Results, difference, p_value
from .intervals import DEFAULT_SEED
from .per_prompt import PerPrompt
from .resampling import ar_chunks, check_memory, gathered


class ApproximateRandomization(PairedTest):
    key = "ar"
    title = "approximate randomization"
    default_resamples = 10000
    unit = "trials"

    def compare(self, baseline: PerPrompt, systems: Sequence[PerPrompt], observed: Mapping[str, Mapping],
                n_samples: int, seed: Optional[int], keys: Optional[Sequence[str]]) -> Results:
        check_memory(n_samples, len(systems) * len(keys if keys is not None else baseline.scorer.keys))
        found = gathered(ar_chunks(len(baseline), n_samples, seed),
                         lambda swaps: [_differences(baseline, s, swaps.astype(float), keys) for s in systems])
        return {s.name: _results(differences, observed[baseline.name], observed[s.name])
                for s, differences in zip(systems, found)}


def ar_swaps(n_prompts: int, n_trials: int = ApproximateRandomization.default_resamples,
             seed: Optional[int] = DEFAULT_SEED) -> np.ndarray:
    """(trials x prompts) booleans: True where a trial swaps the two systems' outputs (sacrebleu's
    draws), all in memory."""
    check_memory(n_trials, n_prompts, "ar_swaps")
    return np.concatenate(list(ar_chunks(n_prompts, n_trials, seed)))


def _differences(baseline: PerPrompt, system: PerPrompt, swaps: np.ndarray, keys: Optional[Sequence[str]]
                 ) -> Dict[str, np.ndarray]:
    """Each measure's absolute difference of the two pseudo-systems of each trial in ``swaps``."""
    # a trial's pseudo-systems: the baseline with the swapped prompts' rows moved over from the system,
    # and the system with them moved back; one product gives what every trial moves
    moved = swaps @ (system.matrix - baseline.matrix)
    shuffled_a = baseline.scores_of(baseline.matrix.sum(0) + moved, keys)
    shuffled_b = baseline.scores_of(system.matrix.sum(0) - moved, keys)
    return {key: np.abs(shuffled_a[key] - shuffled_b[key]) for key in shuffled_a}


def _results(differences: Dict[str, np.ndarray], base_scores: Mapping, own_scores: Mapping
             ) -> Dict[str, PairedResult]:
    results = {}
    for key, found in differences.items():
        observed = difference(base_scores[key], own_scores[key])
        p = p_value(found, observed) if observed is not None and not np.isnan(found).any() else None
        results[key] = PairedResult(own_scores[key], p)
    return results
