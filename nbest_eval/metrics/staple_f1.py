"""STAPLE 2020 weighted macro F1 and its companions, following the official scorer's rules.

The predicted set is the set of normalized keys of the (optionally truncated) n-best list. A prompt
with no gold translations (nil answer) has no recall to measure; ``--wf1-nil`` says what it counts
for (:data:`NIL`). ``score``, the default, which every earlier number and training run used: 1 on
every component when nothing is predicted and 0 otherwise, in a mean over all prompts. ``skip``: left
out of the mean, as the official scorer leaves it out (its gold reader drops a prompt without
translations), for numbers to set beside STAPLE's official ones.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional

from ..data import Hyp, InputError
from ..prompt import Judged, norm
from .base import N_PROMPTS, N_REL, PromptMean
from .registry import Param, register

COMPONENTS = ("wf1", "f1", "precision", "recall", "wrecall")


def truncate(hyps: List[Hyp], top: Optional[int], threshold: Optional[float], prompt_id: str) -> List[Hyp]:
    """Keep the top ``top`` hypotheses, or those whose natural-log score is at least the rank-1
    hypothesis' score + ln(``threshold``), i.e. whose probability is at least that fraction of the
    rank-1 hypothesis' (the list's own order decides which is on top, as a beam search gives it)."""
    if top is not None:
        return hyps[:top]
    if threshold is not None and hyps:
        if any(h.score is None for h in hyps):
            raise InputError(f"prompt {prompt_id}: the F1 threshold needs a model score for every hypothesis")
        cut = hyps[0].score + math.log(threshold)
        return [h for h in hyps if h.score >= cut]
    return hyps


def f1_components(predicted: set, weights: Dict[str, float]) -> Dict[str, float]:
    if not weights:
        perfect = 1.0 if not predicted else 0.0
        return dict.fromkeys(COMPONENTS, perfect)
    hits = [key for key in weights if key in predicted]  # gold order: sums do not depend on set order
    precision = len(hits) / len(predicted) if predicted else 0.0
    recall = len(hits) / len(weights)
    total, found = sum(weights.values()), sum(weights[k] for k in hits)
    if math.isinf(total):  # finite weights near the float maximum: the sums overflow, their ratio does not
        top = max(weights.values())
        total, found = sum(w / top for w in weights.values()), sum(weights[k] / top for k in hits)
    wrecall = found / total if total > 0 else 0.0
    return {
        "wf1": _harmonic(precision, wrecall),
        "f1": _harmonic(precision, recall),
        "precision": precision,
        "recall": recall,
        "wrecall": wrecall,
    }


def f1_component(name: str, top: Optional[int], threshold: Optional[float]):
    def per_prompt(j: Judged) -> float:
        kept = truncate(j.hyps, top, threshold, j.gold.prompt.id)
        return f1_components({norm(h.text) for h in kept}, j.gold.weights)[name]
    return per_prompt


def _harmonic(a: float, b: float) -> float:
    return 2 * a * b / (a + b) if a + b > 0 else 0.0


def truncation_label(options) -> str:
    """The signature's ``trunc`` field: ``none``, ``topN`` or ``thrTAU``."""
    if options.wf1_top is not None:
        return f"top{options.wf1_top}"
    return f"thr{options.wf1_threshold!r}" if options.wf1_threshold is not None else "none"


def set_measure(key: str, per_prompt, options) -> PromptMean:
    """The mean of a measure of the predicted set (the F1 family, ``f{b}``, ``e{b}``) as ``--wf1-nil``
    says: over all prompts, or over those with valid translations. Its signature names the truncation,
    and the nil rule where it is not the default, so that earlier signatures still name their numbers."""
    skip = options.wf1_nil == "skip"
    signed = {"trunc": truncation_label(options), **({"nil": options.wf1_nil} if skip else {})}
    return PromptMean(key, per_prompt, N_REL if skip else N_PROMPTS, signed)


def _component(match, options) -> PromptMean:
    key = match.group(0)
    return set_measure(key, f1_component(key, options.wf1_top, options.wf1_threshold), options)


#: the list's truncation before the F1 family (:func:`truncate`): by rank, or by probability
TRUNCATION = (
    Param("wf1_top", int, None, "F1 family: keep only the top N hypotheses", metavar="N",
          valid=(">= 1", lambda n: n >= 1), exclusive="truncation"),
    Param("wf1_threshold", float, None,
          "F1 family: keep hypotheses whose probability is at least TAU times the rank-1 hypothesis' (needs model "
          "scores, read as natural-log probabilities; fairseq's base-2 scores are converted when read)",
          metavar="TAU", valid=("in (0, 1]", lambda tau: 0 < tau <= 1), exclusive="truncation"))
#: what a prompt without valid translations counts for in the means of the predicted set's measures
NIL = Param("wf1_nil", str, "score",
            "F1 family, f{b}, e{b}: a prompt without valid translations is scored (1 when nothing is predicted, "
            "else 0) or skipped (left out of the mean, as STAPLE's official scorer does)", choices=("score", "skip"))
#: the settings of the measures of the predicted set
SET_PARAMS = TRUNCATION + (NIL,)
_TRUNCATION = "(`--wf1-top` / `--wf1-threshold` truncate the list first)"
register("wf1", None, f"STAPLE 2020's official weighted macro F1: precision vs learner-weighted recall {_TRUNCATION}",
         SET_PARAMS)(_component)
register("f1", None, "macro F1 with unweighted recall", SET_PARAMS)(_component)
register("precision", None, "macro precision of the predicted set", SET_PARAMS)(_component)
register("recall", None, "macro recall: the fraction of the valid translations predicted", SET_PARAMS)(_component)
register("wrecall", None, "macro weighted recall: the learner-weight fraction predicted", SET_PARAMS)(_component)
