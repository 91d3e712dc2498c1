"""The AWS 1-best baseline scored as STAPLE's official scorer would, with its intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from nbest_eval.data import Gold

from .settings import METRICS, OFFICIAL


def score_baseline(path: Path, gold: Gold, valid: Gold) -> Dict:
    """The AWS 1-best file scored on the validation prompts with the validation measures as STAPLE's
    official scorer scores it (:data:`OFFICIAL`), with their 95% bootstrap intervals over prompts and
    the measures' signature."""
    from nbest_eval import Scorer
    from nbest_eval.formats import read_nbest
    from nbest_eval.signature import signature
    from nbest_eval.significance import PerPrompt, confidence_intervals

    lists = read_nbest(str(path), gold, "staple")
    scorer = Scorer(METRICS, **OFFICIAL)
    scored = scorer.score(valid, {pid: hyps for pid, hyps in lists.items() if pid in valid}, keep_per_prompt=True)
    return {"file": str(path.resolve()), "n_prompts": scored.n_prompts, "n_empty": scored.n_empty,
            **scored.values, "signature": signature(scorer, valid, scored.nbest_size),
            "ci": intervals_json(confidence_intervals(PerPrompt(scorer, scored.per_prompt)))}


def intervals_json(intervals: Dict) -> Dict:
    return {k: None if ci is None else ci.as_dict() for k, ci in intervals.items()}
