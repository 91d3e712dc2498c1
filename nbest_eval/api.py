"""The one-call API: score an n-best file (or lists in memory) against a gold file (or object).

    from nbest_eval import score
    result = score("dev.gold.txt", "generate-valid.txt", metrics="map,bleu_100x100,wf1")
    result.values["map"], result.n_prompts

In a training loop keep a :class:`~nbest_eval.scorer.Scorer` instead: it caches the references'
statistics and its per-prompt statistics add up across workers.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from .data import Gold, Hyp, InputError, NBest
from .formats import read_gold, read_nbest
from .formats.common import check_inputs
from .output import PathLike
from .scorer import DEFAULT_METRICS, Scored, Scorer
from .signature import resampling, signatures
from .significance import DEFAULT_SAMPLES, DEFAULT_SEED, PerPrompt, confidence_intervals


def score(gold: Union[PathLike, Gold], nbest: Union[PathLike, Mapping[str, Sequence[Any]]], *,
          metrics: Union[str, Sequence[str]] = DEFAULT_METRICS, format: str = "auto",
          nbest_size: Optional[int] = None, confidence: bool = False, n_samples: int = DEFAULT_SAMPLES["bs"],
          seed: Optional[int] = DEFAULT_SEED, **scorer_options: Any) -> Scored:
    """Score every gold prompt (a prompt without a list counts as an empty list).

    ``gold``: a STAPLE gold file or a :class:`Gold`. ``nbest``: an n-best file (``format``: as
    ``nbest-eval score --format``; ``nbest_size`` for ``lines``) or ``{prompt_id: [hypothesis, ...]}`` in
    rank order, each a :class:`Hyp` or a plain string (no model score), checked as a file would be
    (:func:`nbest_lists`). ``confidence``: also each measure's 95% bootstrap interval over prompts
    (``result.intervals``, as ``score --confidence``). ``scorer_options``: :class:`Scorer`'s. The
    result carries each measure's signature (``result.signatures``).
    """
    if not isinstance(gold, Gold) and isinstance(nbest, (str, os.PathLike)):
        check_inputs({"gold": gold, "nbest": nbest})
    scorer = Scorer(metrics, **scorer_options)  # bad options fail before any file is read
    gold = gold if isinstance(gold, Gold) else read_gold(gold)
    if isinstance(nbest, (str, os.PathLike)):
        lists = read_nbest(nbest, gold, format, nbest_size=nbest_size)
    else:
        lists = nbest_lists(nbest, gold)
    result = scorer.score(gold, lists, keep_per_prompt=confidence)
    resampled = None
    if confidence:
        result.intervals = confidence_intervals(PerPrompt(scorer, result.per_prompt), n_samples, seed)
        resampled = resampling("bs", n_samples, seed)
    result.signatures = signatures(scorer, gold, result.nbest_size, resampled)
    return result


def nbest_lists(nbest: Any, gold: Gold) -> NBest:
    """``{prompt_id: [hypothesis, ...]}`` checked as the file readers check a file: a mapping of gold
    prompt ids to lists (a plain string is no list of hypotheses), each hypothesis a string or a
    :class:`Hyp` whose score is None, finite or -inf; and at least one list (none scores all zeros)."""
    if not isinstance(nbest, Mapping):
        raise InputError(f"nbest must be a file or a mapping of prompt ids to lists, got {type(nbest).__name__}")
    if not nbest:
        raise InputError("no n-best list given (an empty mapping would score every prompt as an empty list)")
    lists = {}
    for prompt_id, hyps in nbest.items():
        if not isinstance(prompt_id, str) or prompt_id not in gold:
            where = f" {gold.path}" if gold.path else ""
            raise InputError(f"prompt id {prompt_id!r} is not in the gold{where}")
        if isinstance(hyps, (str, bytes)) or not isinstance(hyps, Iterable):
            raise InputError(f"prompt {prompt_id}: the hypotheses must be a list, got {type(hyps).__name__}")
        lists[prompt_id] = [_hyp(h, prompt_id, rank) for rank, h in enumerate(hyps, 1)]
    return lists


def _hyp(hyp: Any, prompt_id: str, rank: int) -> Hyp:
    where = f"prompt {prompt_id}, rank {rank}"
    if isinstance(hyp, str):
        return Hyp(hyp)
    if not isinstance(hyp, Hyp) or not isinstance(hyp.text, str):
        raise InputError(f"{where}: a hypothesis must be a string or a nbest_eval.Hyp(text, score), got {hyp!r:.60}")
    score = hyp.score
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or math.isnan(score) or score == math.inf):
        raise InputError(f"{where}: score {score!r:.60} is not a log-probability (a finite number, -inf or None)")
    return hyp


__all__ = ["score", "NBest"]
