"""Metric keys -> :class:`~nbest_eval.metrics.base.Metric` objects.

Keys: ``map``, ``map_min``, ``rr``, ``p{k}``, ``recall{k}``, ``rprec``, ``ndcg{k}``, ``rr_t``,
``rbp_t``, ``ndcg_t``, ``ap_t``, ``wf1``, ``f1``, ``precision``, ``recall``, ``wrecall``,
``pref_spearman``, ``pref_pearson``, ``bleu_{x}x{y}`` (x, y a count or ``all``).
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from . import ranking, truncated
from .base import N_EMPTY, N_PROMPTS, N_REL, Metric, PromptMean
from .bleu import BleuEngine, XYBleu
from .preference import PreferenceCorrelation
from .staple_f1 import COMPONENTS as F1_COMPONENTS, f1_component

KEY_HELP = ("map, map_min, rr, p{k}, recall{k}, rprec, ndcg{k}, rr_t, rbp_t, ndcg_t, ap_t, wf1, f1, "
            "precision, recall, wrecall, pref_spearman, pref_pearson, bleu_{x}x{y} (x, y: a count or 'all')")

_FIXED = {
    "map": (ranking.average_precision, N_REL),
    "map_min": (ranking.average_precision_min, N_REL),
    "rr": (ranking.reciprocal_rank, N_REL),
    "rprec": (ranking.r_precision, N_REL),
    "rr_t": (truncated.reciprocal_rank_t, N_PROMPTS),
    "ndcg_t": (truncated.ndcg_t, N_PROMPTS),
    "ap_t": (truncated.average_precision_t, N_PROMPTS),
}
_AT_K = {"p": ranking.precision_at, "recall": ranking.recall_at, "ndcg": ranking.ndcg_at}
_AT_K_PATTERN = re.compile(r"(p|recall|ndcg)(\d+)")


class UnknownMetric(ValueError):
    pass


def make_metric(key: str, *, bleu: Callable[[], BleuEngine], wf1_top: Optional[int] = None,
                wf1_threshold: Optional[float] = None, rbp_p: float = 0.5) -> Metric:
    """The metric named ``key``; raises :class:`UnknownMetric` naming the valid keys.

    ``bleu`` gives the (shared) BLEU engine; it is called only for BLEU keys.
    """
    if key in _FIXED:
        fn, over = _FIXED[key]
        return PromptMean(key, fn, over)
    at_k = _AT_K_PATTERN.fullmatch(key)
    if at_k and int(at_k.group(2)) > 0:
        return PromptMean(key, _AT_K[at_k.group(1)](int(at_k.group(2))), N_REL)
    if key == "rbp_t":
        return PromptMean(key, truncated.rbp_t(rbp_p), N_PROMPTS)
    if key in F1_COMPONENTS:
        return PromptMean(key, f1_component(key, wf1_top, wf1_threshold), N_PROMPTS)
    if key in ("pref_spearman", "pref_pearson"):
        return PreferenceCorrelation(key)
    bleu_key = XYBleu.PATTERN.fullmatch(key)
    if bleu_key and all(g == "all" or int(g) > 0 for g in bleu_key.groups()):
        return XYBleu(key, bleu())
    raise UnknownMetric(f"unknown metric {key!r}; valid keys: {KEY_HELP}")


class _BleuKey(Exception):
    """Raised in place of building a BLEU engine: the key was a valid BLEU key."""


def is_metric_key(key: str) -> bool:
    """Whether ``key`` names a metric, without building it (no sacrebleu set-up)."""
    def no_engine():
        raise _BleuKey
    try:
        make_metric(key, bleu=no_engine)
    except UnknownMetric:
        return False
    except _BleuKey:
        pass
    return True


__all__ = ["Metric", "make_metric", "is_metric_key", "UnknownMetric", "KEY_HELP", "BleuEngine", "N_PROMPTS", "N_REL", "N_EMPTY"]
