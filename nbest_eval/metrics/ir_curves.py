"""Interpolated precision at the 11 standard recall levels and their mean, the 11-point average
precision: the recall-precision curve of IR textbooks, as trec_eval computes it.

At recall level r the interpolated precision is the highest precision at any rank where the
deduplicated list holds at least c(r) of the prompt's R valid translations (0 where it never holds
that many). How a level becomes the count c(r) is ``--iprec-rule``'s choice: trec_eval 9's (and
pytrec_eval's) ``(long)(r * R + 0.9)`` in floating point, or the textbook's exact ceil(r * R).
Averaged, like MAP, over the prompts with R > 0.
"""

from __future__ import annotations

from typing import List

from ..prompt import Judged
from .base import N_REL, PromptMean
from .registry import Param, register

#: the 11 standard recall levels, in tenths: 0.0, 0.1, ..., 1.0
TENTHS = range(11)

IPREC_RULE = Param(
    "iprec_rule", str, "trec_eval",
    "iprec{r} and ipr11: how recall level r becomes a count of valid translations out of R: trec_eval "
    "(trec_eval 9 and pytrec_eval: (long)(r*R + 0.9) in floating point, which gives 2 for r=0.7, R=3) or "
    "exact (ceil(r*R), the textbook's highest precision at any recall >= r)", choices=("trec_eval", "exact"))


def needed(tenths: int, R: int, rule: str) -> int:
    """Valid translations the list must hold to reach recall ``tenths``/10 of ``R``."""
    if rule == "exact":
        return -(-tenths * R // 10)  # integer ceiling: 0.3 * 10 is 3.0000000000000004 in floating point
    return int(tenths / 10 * R + 0.9)  # trec_eval's C, m_iprec_at_recall.c: a double product, plus 0.9, cut


def interpolated_precisions(j: Judged, rule: str) -> List[float]:
    """The interpolated precision at each of the 11 levels, 0.0 first."""
    found = [i for i, s in enumerate(j.rel, 1) if s]  # ranks of the valid hypotheses
    best_from = [m / rank for m, rank in enumerate(found, 1)]  # precision at the m-th valid one...
    for m in range(len(best_from) - 2, -1, -1):
        best_from[m] = max(best_from[m], best_from[m + 1])  # ...then the best at or after it
    counts = (needed(t, j.R, rule) for t in TENTHS)
    return [best_from[max(c, 1) - 1] if found and c <= len(found) else 0.0 for c in counts]


def eleven_point_average(rule: str):
    def ipr11(j: Judged) -> float:
        return sum(reversed(interpolated_precisions(j, rule))) / len(TENTHS)  # trec_eval adds 1.0 first
    return ipr11


def iprec_at(tenths: int, rule: str):
    def iprec(j: Judged) -> float:
        return interpolated_precisions(j, rule)[tenths]
    return iprec


def _iprec(match, options) -> PromptMean:
    tenths = round(float(match.group(1)) * 10)
    return PromptMean(match.group(0), iprec_at(tenths, options.iprec_rule), N_REL, {"rule": options.iprec_rule})


register("iprec{r}", r"iprec(0\.[0-9]|1\.0)",
         "interpolated precision at recall level r = 0.0, 0.1, ..., 1.0: the highest precision at recall >= r "
         "(trec_eval `iprec_at_recall`; `--iprec-rule` turns r into a count)", [IPREC_RULE])(_iprec)
register("ipr11", None, "11-point average precision: the mean of `iprec0.0` ... `iprec1.0` (trec_eval `11pt_avg`)",
         [IPREC_RULE])(lambda match, options: PromptMean(
             "ipr11", eleven_point_average(options.iprec_rule), N_REL, {"rule": options.iprec_rule}))
