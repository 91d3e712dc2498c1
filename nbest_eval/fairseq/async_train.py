"""The trainer's half of ``--nbest-mode async`` (issue 33): at each validation the ``translation_nbest``
task hands a weights-only snapshot to the queue (:mod:`nbest_eval.training.handoff`) instead of
generating, shows the sidecar's results as they arrive, and carries out its verdict through fairseq's
own stop and checkpoint levers, as :mod:`.early_stopping` does for the loop.

fairseq needs a number for ``--best-checkpoint-metric`` at every validation: the valid line's n-best
keys are the latest *arrived* result's (``nbest_of_update`` says whose), ``best_{metric}`` and
``nbest_kept_update`` are the verdict's. fairseq never writes ``checkpoint_best.pt`` itself in this
mode; at the end of training, once the queue is drained, it is made a link to the snapshot the rule
kept (``nbest-async/kept/``). The stop comes at the first validation after the stop verdict
arrives, so training may run a few validations longer than in the loop; the verdict and the kept
weights are the loop's. Only rank 0 touches the queue; the other ranks get its outcome.
"""

import inspect
import logging
import os
from typing import Any, Dict, Optional

import torch
from fairseq import checkpoint_utils
from fairseq.distributed import utils as distributed_utils

from ..scorer import PROMPTS
from ..selection.checkpoint_files import link_best
from ..training.early_stopping import EarlyStopping
from ..training.handoff_files import Tags
from ..training.trainer_side import Arrival, TrainerSide, new_manifest
from . import early_stopping
from .generation import TIMINGS
from .snapshot import snapshot_state, task_settings
from .startup import NBestConfigError

logger = logging.getLogger(__name__)

WHO = "translation_nbest"


def _rank0() -> bool:
    return distributed_utils.get_global_rank() == 0


def _shared(value: Any) -> Any:
    """Rank 0's ``value`` on every rank."""
    if distributed_utils.get_data_parallel_world_size() <= 1:
        return value
    return distributed_utils.broadcast_object(value, src_rank=0, group=distributed_utils.get_data_parallel_group())


class AsyncTrainer:
    """Hands off, reads back, carries out; one per training run (built by the task's ``build_criterion``).
    The queue, the child sidecar and the drain are :class:`~nbest_eval.training.trainer_side.TrainerSide`'s."""

    def __init__(self, task: Any, stopping: Optional[EarlyStopping]):
        self.task, self.cfg, self.stopping = task, task.cfg, stopping
        self.run_cfg = self.cfg._get_root()  # the whole run's config: the task config is a node of it
        device = self.cfg.nbest_async_device or training_device(self.run_cfg)
        self.side = TrainerSide(self.cfg.save_dir, device, self.cfg.nbest_async_queue,
                                bool(self.cfg.nbest_async_skip), self.cfg.nbest_async_timeout, WHO,
                                tensorboard_logdir=self.run_cfg.common.tensorboard_logdir)
        self.queue = self.side.queue
        self.latest: Optional[Dict[str, Any]] = None  # the latest arrived evaluated result
        self.began = False  # start() ran (on this rank)

    # -- start -------------------------------------------------------------------------------

    def start(self, epoch: int) -> None:
        """Before the first epoch: on every rank, refuse a resume the queue cannot follow (rank 0 checks,
        every rank raises); then, on rank 0, hold the queue, write the manifest, beat, start the sidecar."""
        if self.began:
            return
        self.began = True
        resumed = _resumed_update() if _rank0() else None
        refusal = _shared(self._resume_refusal(epoch, resumed) if _rank0() else None)
        if refusal:
            raise NBestConfigError(refusal)
        if not _rank0():
            return
        if self.run_cfg.checkpoint.no_save_optimizer_state:
            logger.warning(f"{WHO}: --nbest-mode async with --no-save-optimizer-state: fairseq resumes such a "
                           f"checkpoint at update 0, so this run cannot be resumed in async mode")
        plan, common = self.task.plan, self.run_cfg.common
        manifest = new_manifest("fairseq", self.cfg.nbest_gold, plan.gold.digest(),
                                {"task": task_settings(self.run_cfg)}, self.stopping, self.cfg.nbest_async_queue,
                                bool(self.cfg.nbest_async_skip), trainer_device="cpu" if common.cpu else "cuda",
                                dtype="float16" if common.fp16 else "bfloat16" if common.bf16 else "float32",
                                threads=torch.get_num_threads(), best=self._best())
        self.side.start(manifest, lambda: self.conclude(failed=True), resumed_at=resumed,
                        saved_at=self._last_saved_at())

    def _resume_refusal(self, epoch: int, resumed: int) -> Optional[str]:
        """Why training cannot resume here in async mode, or None: fairseq counts updates from 0 again
        (a checkpoint without optimizer state), so the queue's validations cannot be matched to its."""
        handed = self.queue.results() or any(self.queue.entries(folder) for folder in ("snapshots", "kept"))
        if resumed != 0 or epoch <= 1 or not handed:
            return None
        return (f"--nbest-mode async: training resumes at epoch {epoch} but at update 0 (the checkpoint has no "
                f"optimizer state: --no-save-optimizer-state, or --reset-optimizer), so the updates of "
                f"{self.queue.root}'s validations cannot be matched to this run's. Resume from a checkpoint "
                f"saved with its optimizer state, or start anew in another --save-dir")

    def _last_saved_at(self):
        """When ``checkpoint_last.pt``, what fairseq resumes from, was written (a callable); None when
        the run writes none (``--no-save``, ``--no-last-checkpoints``): no resume is rolled back then."""
        checkpoint = self.run_cfg.checkpoint
        if checkpoint.no_save or checkpoint.no_last_checkpoints:
            return None
        path = os.path.join(self.cfg.save_dir, f"checkpoint_last{checkpoint.checkpoint_suffix or ''}.pt")

        def written() -> Optional[float]:
            try:
                return os.stat(path).st_mtime
            except FileNotFoundError:
                return None
        return written

    def _best(self) -> Optional[Dict[str, Any]]:
        """Without a rule, what the sidecar keeps: the best ``--best-checkpoint-metric`` so far where it is
        an n-best measure (fairseq cannot see it), else nothing (fairseq keeps its best by the loss)."""
        if self.stopping is not None:
            return None
        metric = self.cfg.best_checkpoint_metric
        return {"metric": metric if metric in self.task.scorer.keys else None,
                "maximize": bool(self.cfg.maximize_best_checkpoint_metric)}

    # -- each validation -----------------------------------------------------------------------

    def after_validation(self, model: Any, stats: Dict[str, Any], epoch: int) -> None:
        """Hand off this validation's snapshot, show what arrived, set the valid line and carry out the verdict."""
        updates = int(stats.get("num_updates", 0))
        outcome = None
        if _rank0():
            def render(partial: str, info: Dict[str, Any]) -> None:
                torch.save(snapshot_state(self.run_cfg, model, self.task, epoch, updates, info), partial)

            self.side.hand_off(render, Tags(None, 0, updates, "u", epoch, ".pt"))
            outcome = self._arrived()
        outcome = _shared(outcome)
        self._set_stats(stats, outcome)

    def _arrived(self) -> Dict[str, Any]:
        """The results that arrived since the last validation (logged), and the verdict now."""
        for arrival in self.side.arrived():
            self._show(arrival)
        return {"latest": self.latest, "verdict": self.queue.read_verdict(), "pending": len(self.queue.waiting())}

    def _show(self, arrival: Arrival) -> None:
        tags = arrival.result["tags"]
        where = f"epoch {tags.get('epoch')}, update {tags.get('update')}"
        if arrival.reason:
            logger.info(f"{WHO}: sidecar: {where}: not evaluated: {arrival.reason}")
            return
        values, timings = arrival.result["values"], arrival.result.get("timings", {})
        self.latest = {"update": tags.get("update"), "values": values,
                       # the valid line's n-best keys are all the latest arrived result's
                       "shown": {PROMPTS: arrival.result.get("n_prompts", 0),
                                 **{key: timings.get(key, 0.0) for key in TIMINGS}}}
        shown = "  ".join(f"{k} {v:.4f}" if v is not None else f"{k} -" for k, v in values.items())
        explain = (arrival.decision or {}).get("explain")
        logger.info(f"{WHO}: sidecar: {where}: {shown} (ready {arrival.lag_s:.0f} s after its hand-off, "
                    f"{arrival.lag_validations} later validation(s) handed off meanwhile)"
                    + (f"; early stopping: {explain}" if explain else ""))

    def _set_stats(self, stats: Dict[str, Any], outcome: Dict[str, Any]) -> None:
        latest, verdict = outcome["latest"], outcome["verdict"]
        for key in self.task.scorer.keys:
            value = None if latest is None else latest["values"].get(key)
            stats[key] = 0.0 if value is None else float(value)
        if latest is not None:
            stats.update(latest["shown"], nbest_of_update=latest["update"])
        stats["nbest_pending"] = outcome["pending"]
        metric = self.cfg.best_checkpoint_metric
        value = float(stats.get(metric, 0.0))
        maximize = bool(self.cfg.maximize_best_checkpoint_metric)
        kept = (verdict or {}).get("kept")
        stats.pop("best_" + metric, None)  # fairseq's, from a best it never sees in this mode
        if kept is not None:
            stats["best_" + metric] = 0.0 if kept.get("value") is None else kept["value"]
            stats["nbest_kept_update"] = kept.get("step")
        stop = bool((verdict or {}).get("stop"))
        if metric in self.task.scorer.keys:  # a loss metric: fairseq's own best and patience, as in the loop
            carry_out_async(stop, value, maximize, self.cfg.patience)
        if stop:
            logger.info(f"{WHO}: the sidecar's verdict is stop: {(verdict or {}).get('explain', '')}")

    # -- the end -------------------------------------------------------------------------------

    def conclude(self, failed: bool = False) -> None:
        """When training ends: wait (bounded) for the queue to be decided, say what is kept, stop the sidecar."""
        drained = self.side.conclude(failed)
        if drained is None or failed:
            return
        self._arrived()
        verdict = self.queue.read_verdict() or {}
        kept = verdict.get("kept")
        if kept is None:
            logger.info(f"{WHO}: async: the sidecar kept no snapshot (no validation decided, or "
                        f"--best-checkpoint-metric {self.cfg.best_checkpoint_metric} is fairseq's to keep)")
            return
        if kept.get("path") is None:
            logger.error(f"{WHO}: the rule keeps update {kept.get('step')}, but its snapshot was deleted before "
                         f"training resumed from an older checkpoint: no checkpoint_best.pt is made")
            return
        path = os.path.join(self.queue.root, kept["path"])
        suffix = self.run_cfg.checkpoint.checkpoint_suffix or ""
        link = os.path.join(self.cfg.save_dir, f"checkpoint_best{suffix}.pt")
        how = link_best(path, link, force=True) if not os.path.isfile(link) or os.path.islink(link) else None
        why = self.stopping.conclusion(self._state(verdict), unit="update") if self.stopping else verdict["explain"]
        logger.info(f"{WHO}: checkpoint_best.pt: update {kept.get('step')} (epoch {kept.get('epoch')}), {why}; "
                    f"weights-only snapshot at {path} (no optimizer state: resume from it with --reset-optimizer; "
                    f"the queue holds {self.queue.disk_use() / 1e6:.1f} MB now)"
                    + ("" if how else f"; {link} is a file of its own and was left alone"))

    def _state(self, verdict: Dict[str, Any]):
        gold = self.task.plan.gold
        return self.stopping.restore(verdict["state"], self.task.scorer, gold.ids(), None, gold.digest())


def _resumed_update() -> int:
    """The update training starts from: the fairseq Trainer whose ``begin_epoch`` called the task's."""
    from fairseq.trainer import Trainer

    frame = inspect.currentframe()
    while frame is not None:
        found = frame.f_locals.get("self")
        if isinstance(found, Trainer):
            return int(found.get_num_updates())
        frame = frame.f_back
    raise RuntimeError(f"{WHO}: --nbest-mode async: no fairseq Trainer on the call stack, so the update training "
                       f"resumes from is unknown")


def carry_out_async(stop: bool, value: float, maximize: bool, patience: int) -> None:
    """fairseq's levers in async mode: ``should_stop_early`` stops now iff ``stop``; ``save_checkpoint``
    never finds ``value`` better than its best, so it never writes checkpoint_best.pt itself."""
    for fn in early_stopping._stop_early_functions():
        if stop:
            fn.best, fn.num_runs = early_stopping._beyond(value, maximize), max(patience, 1) - 1
        else:
            fn.best = None
    checkpoint_utils.save_checkpoint.best = early_stopping._beyond(value, maximize)


def training_device(run_cfg: Any) -> str:
    """Where fairseq trains, the child sidecar's default device: the CPU with --cpu or without CUDA
    (fairseq falls back to it), else the first GPU."""
    return "cpu" if run_cfg.common.cpu or not torch.cuda.is_available() else "cuda:0"
