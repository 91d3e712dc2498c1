"""van Rijsbergen's F and E measures of the predicted set, at any beta: ``f{b}`` and ``e{b}``.

F_b = (1 + b^2) P R / (b^2 P + R) and E_b = 1 - F_b, with the precision P and the (unweighted)
recall R of the F1 family (:mod:`.staple_f1`): the same predicted set (``--wf1-top`` /
``--wf1-threshold`` truncate it first), the same nil-answer rule and mean (``--wf1-nil``). So
``f1`` is F_1 and ``e1`` is 1 - ``f1``; b > 1 weighs recall more, b < 1 precision. trec_eval's
``set_F.x`` is F with b^2 = x: ``f2`` is its ``set_F.4``.
"""

from __future__ import annotations

from typing import List, Optional

from ..prompt import Judged, norm
from .base import PromptMean
from .registry import register
from .staple_f1 import SET_PARAMS, f1_components, set_measure, truncate

#: a positive decimal as a key spells it: no leading or trailing zeros (f2, f0.5, f12.25), so one number, one key
BETA = r"(?!0\Z)((?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?)"


def answer(j: Judged, top: Optional[int], threshold: Optional[float]) -> List[str]:
    """The keys of the (truncated) list, each once, in rank order: the answer set of the set measures."""
    kept = truncate(j.hyps, top, threshold, j.gold.prompt.id)
    return list(dict.fromkeys(norm(h.text) for h in kept))


def f_beta(beta: float, top: Optional[int], threshold: Optional[float]):
    b2 = beta * beta

    def per_prompt(j: Judged) -> float:
        components = f1_components(set(answer(j, top, threshold)), j.gold.weights)
        p, r = components["precision"], components["recall"]
        return (1 + b2) * p * r / (b2 * p + r) if p + r > 0 else 0.0
    return per_prompt


def e_beta(beta: float, top: Optional[int], threshold: Optional[float]):
    f = f_beta(beta, top, threshold)
    return lambda j: 1.0 - f(j)


def _factory(measure):
    def make(match, options) -> PromptMean:
        per_prompt = measure(float(match.group(1)), options.wf1_top, options.wf1_threshold)
        return set_measure(match.group(0), per_prompt, options)
    return make


_SET = "of the predicted set, over all prompts as `f1`"
register("f{b}", rf"f(?!1\Z){BETA}", f"F measure F_b = (1 + b^2) P R / (b^2 P + R) {_SET}; b > 1 favours recall "
         "(`f2`, `f0.5`; `f1` is the F1 above; trec_eval's `set_F.x` is b^2 = x)", SET_PARAMS)(_factory(f_beta))
register("e{b}", rf"e{BETA}", f"van Rijsbergen's E measure E_b = 1 - F_b {_SET} (`e1` = 1 - `f1`): lower is better",
         SET_PARAMS, higher_is_better=False)(_factory(e_beta))
