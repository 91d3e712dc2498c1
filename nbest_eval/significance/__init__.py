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

One module per concept: :mod:`.per_prompt` (what is resampled), :mod:`.resampling` (draws within
memory), :mod:`.intervals`, :mod:`.base` (what a paired test is), one module per test
(:mod:`.bootstrap`, :mod:`.randomization`, :mod:`.t_test`), :mod:`.paired` (their table,
:data:`TESTS`, and :func:`get_test`), :mod:`.holm`. This module re-exports them.
"""

from .base import PairedResult, PairedTest, p_value
from .bootstrap import PairedBootstrap
from .holm import DEFAULT_ALPHA, holm
from .intervals import (
    BOOTSTRAP_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    bootstrap_draws,
    bootstrap_scores,
    confidence_intervals,
    interval,
    interval_note,
)
from .paired import (
    DEFAULT_SAMPLES,
    TESTS,
    check_mean,
    get_test,
    paired_help,
    paired_test,
    resamples_for,
    resolution_note,
)
from .per_prompt import PerPrompt, check_paired, check_resampling, check_systems
from .randomization import ApproximateRandomization, ar_swaps
from .t_test import PairedTTest

__all__ = [
    "ApproximateRandomization", "BOOTSTRAP_RESAMPLES", "DEFAULT_ALPHA", "DEFAULT_SAMPLES", "DEFAULT_SEED",
    "Interval", "PairedBootstrap", "PairedResult", "PairedTTest", "PairedTest", "PerPrompt", "TESTS",
    "ar_swaps", "bootstrap_draws", "bootstrap_scores", "check_mean", "check_paired", "check_resampling",
    "check_systems", "confidence_intervals", "get_test", "holm", "interval", "interval_note", "p_value",
    "paired_test", "resamples_for", "resolution_note", "paired_help",
]
