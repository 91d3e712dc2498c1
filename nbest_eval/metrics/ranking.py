"""Ranking measures over the deduplicated n-best list, as trec_eval defines them.

Each is a per-prompt function of :class:`~nbest_eval.prompt.Judged`; the mean is taken over the
gold's prompts with R > 0 (a prompt with no hypotheses scores 0).
"""

from __future__ import annotations

import math
from typing import List

from ..prompt import Judged
from .base import N_REL, PromptMean
from .registry import register


def average_precision(j: Judged) -> float:
    """AP = (1/R) sum_i s_i T_i / i (trec_eval ``map``)."""
    return _precision_sum(j.rel) / j.R


def average_precision_min(j: Judged) -> float:
    """AP with min(R, k) as the denominator: a short list is not punished for its length alone."""
    k = len(j.rel)
    return _precision_sum(j.rel) / min(j.R, k) if k else 0.0


def reciprocal_rank(j: Judged) -> float:
    for i, s in enumerate(j.rel, 1):
        if s:
            return 1.0 / i
    return 0.0


def precision_at(k: int):
    def p_at_k(j: Judged) -> float:
        return sum(j.rel[:k]) / k
    return p_at_k


def recall_at(k: int):
    def recall_at_k(j: Judged) -> float:
        return sum(j.rel[:k]) / j.R
    return recall_at_k


def r_precision(j: Judged) -> float:
    return sum(j.rel[: j.R]) / j.R


def ndcg_at(k: int):
    """Graded nDCG@k: gains are gold weights; the ideal list is the gold weights sorted descending."""
    def ndcg_at_k(j: Judged) -> float:
        ideal_gains, gains = j.gold.ideal_gains[:k], j.gains[:k]
        ideal = dcg(ideal_gains)
        if math.isinf(ideal):  # finite weights near the float maximum: rescale (nDCG is scale-free)
            top = ideal_gains[0]
            ideal_gains, gains = [g / top for g in ideal_gains], [g / top for g in gains]
            ideal = dcg(ideal_gains)
        return dcg(gains) / ideal if ideal > 0 else 0.0
    return ndcg_at_k


def dcg(gains: List[float]) -> float:
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains, 1))


def _precision_sum(rel: List[int]) -> float:
    total, hits = 0.0, 0
    for i, s in enumerate(rel, 1):
        if s:
            hits += 1
            total += hits / i
    return total


def _mean_over_rel(per_prompt):
    return lambda match, options: PromptMean(match.group(0), per_prompt, N_REL)


def _at_k(at_k):
    return lambda match, options: PromptMean(match.group(0), at_k(int(match.group(1))), N_REL)


register("map", None, "mean average precision of the (deduplicated) n-best list; trec_eval's `map`, "
         "over prompts with valid translations")(_mean_over_rel(average_precision))
register("map_min", None, "AP divided by min(R, list length): does not punish a short list for its length"
         )(_mean_over_rel(average_precision_min))
register("rr", None, "reciprocal rank of the first valid hypothesis")(_mean_over_rel(reciprocal_rank))
register("p{k}", r"p([1-9][0-9]*)", "precision at rank k (trec_eval `P_k`)")(_at_k(precision_at))
register("recall{k}", r"recall([1-9][0-9]*)", "recall at rank k (trec_eval `recall_k`)")(_at_k(recall_at))
register("rprec", None, "precision at rank R, the number of valid translations (trec_eval `Rprec`)"
         )(_mean_over_rel(r_precision))
register("ndcg{k}", r"ndcg([1-9][0-9]*)", "graded nDCG@k with the gold weights as gains")(_at_k(ndcg_at))
