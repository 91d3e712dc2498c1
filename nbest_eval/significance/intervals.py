"""Bootstrap 95% confidence intervals, as sacrebleu draws and reports them: the same draws serve
``nbest-eval score --confidence`` and the paired bootstrap (:mod:`.bootstrap`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from .per_prompt import PerPrompt, check_resampling, check_systems
from .resampling import bootstrap_chunks, check_memory, gathered

DEFAULT_SEED = 12345
#: bootstrap resamples when none are given, as sacrebleu
BOOTSTRAP_RESAMPLES = 1000


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


def interval_note(n_samples: int) -> Optional[str]:
    """A warning where ``n_samples`` bootstrap resamples are too few for a 95% interval: below 40,
    its 2.5% and 97.5% resamples are the lowest and the highest."""
    if n_samples >= 40:
        return None
    return (f"with {n_samples} resamples a 95% interval is just the range of the resamples (its 2.5% and 97.5% "
            f"points need at least 40); use --n-samples {BOOTSTRAP_RESAMPLES}")


def bootstrap_draws(n_prompts: int, n_samples: int = BOOTSTRAP_RESAMPLES, seed: Optional[int] = DEFAULT_SEED
                    ) -> np.ndarray:
    """(samples x prompts) counts: how often each prompt is drawn in each resample (sacrebleu's
    draws), all in memory (the tests here resample in chunks instead: :mod:`nbest_eval.significance.resampling`)."""
    check_memory(n_samples, n_prompts, "bootstrap_draws")
    return np.concatenate(list(bootstrap_chunks(n_prompts, n_samples, seed)))


def bootstrap_scores(systems: Sequence[PerPrompt], n_samples: int = BOOTSTRAP_RESAMPLES,
                     seed: Optional[int] = DEFAULT_SEED, keys: Optional[Sequence[str]] = None
                     ) -> List[Dict[str, np.ndarray]]:
    """Each system's score on every measure (or each of ``keys``) in each of sacrebleu's bootstrap
    resamples (the same draws for all: they must share their prompts), drawn in bounded chunks."""
    count = len(keys) if keys is not None else len(systems[0].scorer.keys)
    check_resampling(n_samples, seed)
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


def confidence_intervals(system: PerPrompt, n_samples: int = BOOTSTRAP_RESAMPLES,
                         seed: Optional[int] = DEFAULT_SEED, keys: Optional[Sequence[str]] = None,
                         draws: Optional[np.ndarray] = None) -> Dict[str, Optional[Interval]]:
    """Every measure's (or each of ``keys``') bootstrap 95% interval (``nbest-eval score
    --confidence``); ``draws``: :func:`bootstrap_draws` already made for these prompts."""
    check_systems(system, [], keys)
    resampled = bootstrap_scores([system], n_samples, seed, keys)[0] if draws is None else \
        system.resampled(draws, keys)
    return {key: interval(values) for key, values in resampled.items()}
