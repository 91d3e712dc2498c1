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

from .data import Gold, NBest, nbest_lists
from .files.output import PathLike
from .formats import read_gold, read_nbest
from .formats.common import check_inputs
from .scorer import DEFAULT_METRICS, Scored, Scorer
from .signature import resampling, signatures
from .significance import BOOTSTRAP_RESAMPLES, DEFAULT_SEED, PerPrompt, confidence_intervals


def score(gold: Union[PathLike, Gold], nbest: Union[PathLike, Mapping[str, Sequence[Any]]], *,
          metrics: Union[str, Sequence[str]] = DEFAULT_METRICS, format: str = "auto",
          nbest_size: Optional[int] = None, confidence: bool = False, n_samples: int = BOOTSTRAP_RESAMPLES,
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


__all__ = ["score", "NBest"]
