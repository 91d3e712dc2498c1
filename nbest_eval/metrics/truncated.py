"""Truncation-aware measures: the list length is the system's choice, so a terminal item at rank k+1
rewards stopping (gain = the fraction of valid translations found, or 1 when the prompt has none).

Binary gains. These are averaged over *all* prompts: an empty list for a nil-answer prompt
scores 1 on each of them.
"""

from __future__ import annotations

from typing import List

from ..prompt import Judged
from .base import N_PROMPTS, PromptMean
from .ranking import dcg
from .registry import Param, register


def extended_gains(j: Judged) -> List[float]:
    """r_1..r_k followed by the terminal gain r_t."""
    rel = [float(s) for s in j.rel]
    terminal = sum(rel) / j.R if j.R > 0 else 1.0
    return rel + [terminal]


def reciprocal_rank_t(j: Judged) -> float:
    for i, r in enumerate(extended_gains(j), 1):
        if r > 0:
            return 1.0 / i
    return 0.0


def rbp_t(p: float):
    def rank_biased_precision_t(j: Judged) -> float:
        gains = extended_gains(j)
        k = len(gains) - 1
        return (1 - p) * sum(r * p ** i for i, r in enumerate(gains[:k])) + gains[k] * p ** k
    return rank_biased_precision_t


def ndcg_t(j: Judged) -> float:
    gains = extended_gains(j)
    ideal = [1.0] * min(j.R + 1, len(gains))
    return dcg(gains) / dcg(ideal)


def average_precision_t(j: Judged) -> float:
    total, running = 0.0, 0.0
    for i, r in enumerate(extended_gains(j), 1):
        running += r
        total += r * running / i
    return total / (j.R + 1)


def _mean(per_prompt):
    return lambda match, options: PromptMean(match.group(0), per_prompt, N_PROMPTS)


RBP_P = Param("rbp_p", float, 0.5, "persistence of RBP'", valid=("in (0, 1)", lambda p: 0 < p < 1))
_TERMINAL = "a terminal item after the list rewards stopping; over all prompts, nil-answer ones included"
register("rr_t", None, f"truncation-aware reciprocal rank RR': {_TERMINAL}")(_mean(reciprocal_rank_t))
register("rbp_t", None, f"truncation-aware rank-biased precision RBP' (persistence `--rbp-p`): {_TERMINAL}",
         [RBP_P])(
    lambda match, options: PromptMean("rbp_t", rbp_t(options.rbp_p), N_PROMPTS, {"p": repr(options.rbp_p)}))
register("ndcg_t", None, f"truncation-aware NDCG' (binary gains): {_TERMINAL}")(_mean(ndcg_t))
register("ap_t", None, f"truncation-aware average precision AP': {_TERMINAL}")(_mean(average_precision_t))
