"""Metric keys -> :class:`~nbest_eval.metrics.base.Metric` objects, through the registry.

Each module below registers its keys when imported (see :mod:`nbest_eval.metrics.registry`);
``nbest-eval metrics`` lists them, and docs/metrics.md defines them exactly. A new metric is a
module that subclasses :class:`Metric` (or uses :class:`PromptMean`) and calls :func:`register`.
"""

# each module registers its keys; their order is that of `nbest-eval metrics` and the README table
# isort: off
from . import ranking, ir_curves, truncated, staple_f1, f_measure, user, preference, bleu, counts  # noqa: F401
# isort: on
from .base import N_EMPTY, N_HYPS, N_PROMPTS, N_REL, Metric, PromptMean
from .bleu import BleuEngine
from .registry import (
    PARAMS,
    REGISTRY,
    MetricOptions,
    Param,
    UnknownMetric,
    higher_is_better,
    is_metric_key,
    key_help,
    make_metric,
    register,
    settings,
)

__all__ = ["Metric", "PromptMean", "MetricOptions", "Param", "PARAMS", "REGISTRY", "register", "settings",
           "make_metric", "is_metric_key", "higher_is_better", "key_help", "UnknownMetric", "BleuEngine",
           "N_PROMPTS", "N_REL", "N_EMPTY", "N_HYPS"]
