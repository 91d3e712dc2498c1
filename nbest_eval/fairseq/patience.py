"""``--patience`` that survives a restart.

fairseq keeps its early-stopping state (``should_stop_early.best`` / ``.num_runs``) in memory only
and saves, but never reloads, the task state of a checkpoint. The ``translation_nbest`` task puts
that state into every checkpoint (:func:`state_to_save`) and, when fairseq resumes training (it
restores ``save_checkpoint.best`` exactly then), reads it back from the checkpoint resumed from
(:func:`restore`).
"""

import logging
import os
import sys
from typing import Any, Dict, List, Optional

import torch
from fairseq import checkpoint_utils, utils
from fairseq.distributed import utils as distributed_utils

from .safe_load import load_state

logger = logging.getLogger(__name__)

#: key of this task's entry in a checkpoint's ``task_state``
STATE_KEY = "nbest_eval"


def state_to_save(metric: Optional[str]) -> Optional[Dict[str, Any]]:
    """The entry to put under :data:`STATE_KEY` in the task state, None before the first validation."""
    for fn in _stop_early_functions():
        best = getattr(fn, "best", None)
        if best is not None:
            return {"patience": {"best": float(utils.item(best)), "num_runs": int(getattr(fn, "num_runs", 0)),
                                 "metric": metric}}
    return None


def restore(cfg: Any) -> None:
    """When fairseq has just resumed training, restore the patience count saved in the checkpoint it
    resumed from (``cfg``: the task config, with the run's checkpoint options). Rank 0 reads the
    file, every rank gets the result."""
    if not hasattr(checkpoint_utils.save_checkpoint, "best"):
        return  # a fresh run (or meters reset): nothing to restore
    path = resumed_checkpoint(cfg)
    patience, problem = None, None
    if _data_parallel_rank() == 0:
        try:
            patience = ((load_state(path).get("task_state") or {}).get(STATE_KEY) or {}).get("patience")
            if patience is None:
                problem = "it has none (saved by another task?)"
        except Exception as err:  # a missing or unreadable file is not worth stopping the run for
            problem = f"cannot read it: {err}"
    if distributed_utils.get_data_parallel_world_size() > 1:
        patience, problem = distributed_utils.broadcast_object(
            (patience, problem), src_rank=0, group=distributed_utils.get_data_parallel_group())
    if patience is None:
        logger.warning(f"translation_nbest: early-stopping state not restored from {path}: {problem}; "
                       f"--patience counts from 0")
        return
    metric = patience.get("metric")
    if metric and cfg.best_checkpoint_metric not in (None, metric):
        logger.warning(f"translation_nbest: early-stopping state in {path} is for --best-checkpoint-metric "
                       f"{metric}, not {cfg.best_checkpoint_metric}; --patience counts from 0")
        return
    for fn in _stop_early_functions():
        fn.best, fn.num_runs = patience["best"], patience["num_runs"]
    logger.info(f"translation_nbest: restored early-stopping state from {path}: best {metric} "
                f"{patience['best']}, {patience['num_runs']} validation(s) without improvement since")


def resumed_checkpoint(cfg: Any) -> str:
    """The file fairseq's ``checkpoint_utils.load_checkpoint`` resumes from (same rules)."""
    suffix = cfg.checkpoint_suffix or ""
    if cfg.restore_file == "checkpoint_last.pt":
        path = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        if not os.path.exists(path) and cfg.continue_once:
            path = cfg.continue_once
        return path
    return cfg.restore_file.replace(".pt", suffix + ".pt")


def _data_parallel_rank() -> int:
    return distributed_utils.get_data_parallel_rank() if torch.distributed.is_initialized() else 0


def _stop_early_functions() -> List[Any]:
    """fairseq_cli.train.should_stop_early, which keeps ``best`` and ``num_runs`` as attributes
    (also under ``__main__`` when training runs as ``python -m fairseq_cli.train``)."""
    found = []
    for name in ("fairseq_cli.train", "__main__"):
        fn = getattr(sys.modules.get(name), "should_stop_early", None)
        if callable(fn) and fn not in found:
            found.append(fn)
    if not found:
        from fairseq_cli import train
        found.append(train.should_stop_early)
    return found
