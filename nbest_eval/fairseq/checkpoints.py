"""Saved ``translation_nbest`` checkpoints: load them (safely) and generate their n-best lists
exactly as validation did (``nbest-eval select --fairseq-data``)::

    models, cfg, task = load_ensemble("checkpoints/checkpoint_best.pt")
    nbest = generate_nbest(task, models, cfg)                 # the valid split, as validated
    values = task.scorer.score(task.plan.gold, nbest).values

:func:`checkpoint_nbest` has the signature of :func:`nbest_eval.hf.checkpoint_nbest` (the generation
options first, then what only fairseq needs: ``data``, ``subset``, ``remove_bpe``, ``detok``).
"""

import os
import warnings
from typing import Any, Dict, Optional, Union

from fairseq import checkpoint_utils

from ..data import Gold, InputError, NBest
from . import task as _task  # noqa: F401  (registers translation_nbest, which the checkpoints name)
from .generation import NBestOptions, generate_nbest
from .safe_load import refuse_unsafe, trusted


def load_ensemble(path: str, overrides: Optional[Dict[str, Any]] = None, trust: bool = False):
    """``(models, cfg, task)`` from a ``translation_nbest`` checkpoint, loaded with torch's safe
    loader (``trust``: full unpickling, see :mod:`~nbest_eval.fairseq.safe_load`). ``overrides``
    replace task options (e.g. ``{"data": ..., "nbest_gold": ...}`` when the files moved). Loading
    writes no n-best files unless ``overrides`` names an ``nbest_save_dir``."""
    if not os.path.isfile(path):
        raise InputError("no such checkpoint file", path)
    overrides = {"nbest_save_dir": None, **(overrides or {})}
    with refuse_unsafe(path), trusted(trust), warnings.catch_warnings():
        # fairseq asks for pinned memory even on a CPU: known and harmless
        warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
        return checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


def checkpoint_nbest(path: str, gold: Union[str, Gold], *, beam: int = 10, nbest_size: Optional[int] = None,
                     max_len_a: float = 0.0, max_len_b: int = 200, lenpen: float = 1.0, data: str,
                     subset: str = "valid", remove_bpe: Optional[str] = None, detok: str = "space",
                     trust: bool = False) -> NBest:
    """The n-best lists of checkpoint ``path`` on ``subset`` of the binarized ``data``, for every
    prompt of ``gold`` (a path, or a :class:`Gold` read from one), generated and post-processed as
    validation does."""
    gold_path = gold.path if isinstance(gold, Gold) else gold
    if not gold_path:
        raise InputError("fairseq checkpoints are scored against a gold file: give its path")
    if not os.path.isdir(data):
        raise InputError("no such data directory (fairseq-preprocess output)", data)
    options = NBestOptions(beam=beam, size=nbest_size, max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen,
                           remove_bpe=remove_bpe, detok=detok)
    models, cfg, task = load_ensemble(path, {"data": data, "nbest_gold": gold_path, "valid_subset": subset}, trust)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
        return generate_nbest(task, models, cfg, subset, options)
