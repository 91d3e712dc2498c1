"""The one-call API: score an n-best file (or lists in memory) against a gold file (or object).

    from nbest_eval import score
    result = score("dev.gold.txt", "generate-valid.txt", metrics="map,bleu_100x100,wf1")
    result.values["map"], result.n_prompts

In a training loop keep a :class:`~nbest_eval.scorer.Scorer` instead: it caches the references'
statistics and its per-prompt statistics add up across workers.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

from .data import Gold, Hyp, InputError, NBest
from .formats import read_gold, read_nbest
from .output import PathLike
from .scorer import DEFAULT_METRICS, Scored, Scorer


def score(gold: Union[PathLike, Gold], nbest: Union[PathLike, Mapping[str, Sequence[Any]]], *,
          metrics: Union[str, Sequence[str]] = DEFAULT_METRICS, format: str = "auto",
          nbest_size: Optional[int] = None, **scorer_options: Any) -> Scored:
    """Score every gold prompt (a prompt without a list counts as an empty list).

    ``gold``: a STAPLE gold file or a :class:`Gold`. ``nbest``: an n-best file (``format``: as
    ``nbest-eval score --format``; ``nbest_size`` for ``lines``) or ``{prompt_id: [hypothesis, ...]}`` in
    rank order, each a :class:`Hyp` or a plain string (no model score). ``scorer_options``: :class:`Scorer`'s.
    """
    gold = gold if isinstance(gold, Gold) else read_gold(gold)
    if isinstance(nbest, (str, os.PathLike)):
        lists = read_nbest(nbest, gold, format, nbest_size=nbest_size)
    else:
        lists = {pid: [_hyp(h, pid) for h in hyps] for pid, hyps in nbest.items()}
    return Scorer(metrics, **scorer_options).score(gold, lists)


def _hyp(hyp: Any, prompt_id: str) -> Hyp:
    if isinstance(hyp, Hyp):
        return hyp
    if isinstance(hyp, str):
        return Hyp(hyp)
    raise InputError(f"prompt {prompt_id}: a hypothesis must be a string or a nbest_eval.Hyp, "
                     f"got {type(hyp).__name__}")


__all__ = ["score", "NBest"]
