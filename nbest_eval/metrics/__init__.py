"""Metric keys -> :class:`~nbest_eval.metrics.base.Metric` objects, through the registry.

Each module below registers its keys when imported (see :mod:`nbest_eval.metrics.registry`);
``nbest-eval metrics`` lists them, and docs/metrics.md defines them exactly. A new metric is a
module that subclasses :class:`Metric` (or uses :class:`PromptMean`) and calls :func:`register`.
"""

from . import bleu, preference, ranking, staple_f1, truncated  # noqa: F401  (each registers its keys)
from .base import N_EMPTY, N_PROMPTS, N_REL, Metric, PromptMean
from .bleu import BleuEngine
from .registry import REGISTRY, MetricOptions, UnknownMetric, is_metric_key, key_help, make_metric, register

__all__ = ["Metric", "PromptMean", "MetricOptions", "REGISTRY", "register", "make_metric", "is_metric_key",
           "key_help", "UnknownMetric", "BleuEngine", "N_PROMPTS", "N_REL", "N_EMPTY"]
