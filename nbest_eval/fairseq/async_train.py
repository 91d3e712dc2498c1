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

import atexit
import logging
import os
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, Optional, Set

import torch
from fairseq import checkpoint_utils
from fairseq.distributed import utils as distributed_utils

from ..selection.checkpoint_files import link_best
from ..training.early_stopping import EarlyStopping
from ..training.handoff import Queue
from ..training.handoff_files import Tags
from ..training.heartbeat import Heartbeat
from . import early_stopping
from .snapshot import snapshot_state, task_settings

logger = logging.getLogger(__name__)

POLL_S = 0.5
#: how many times a child sidecar that ended is started again before the run fails
RESTARTS = 3


def rule_spec(stopping: Optional[EarlyStopping]) -> Optional[Dict[str, Any]]:
    """The rule as the manifest records it: what :func:`~nbest_eval.training.sidecar.rule_from_manifest` rebuilds."""
    if stopping is None:
        return None
    return {name: getattr(stopping, name) for name in ("key", "rule", "patience", "maximize", "alpha", "warmup",
                                                       "n_samples", "seed")}


def _rank0() -> bool:
    return distributed_utils.get_global_rank() == 0


def _shared(value: Any) -> Any:
    """Rank 0's ``value`` on every rank."""
    if distributed_utils.get_data_parallel_world_size() <= 1:
        return value
    return distributed_utils.broadcast_object(value, src_rank=0, group=distributed_utils.get_data_parallel_group())


class AsyncTrainer:
    """Hands off, reads back, carries out; one per training run (built by the task's ``build_criterion``)."""

    def __init__(self, task: Any, stopping: Optional[EarlyStopping]):
        self.task, self.cfg, self.stopping = task, task.cfg, stopping
        self.queue = Queue(self.cfg.save_dir)
        self.run_cfg = self.cfg._get_root()  # the whole run's config: the task config is a node of it
        self.device = self.cfg.nbest_async_device or ("cpu" if self.run_cfg.common.cpu else "cuda:0")
        self.started = self.concluded = False
        self.heartbeat: Optional[Heartbeat] = None
        self.child: Optional[subprocess.Popen] = None
        self.restarts = 0
        self.shown: Set[int] = set()  # seqs whose results were logged (sidecars may place them out of order)
        self.validations = 0  # validations handed off so far
        self.handed: Dict[int, Dict[str, Any]] = {}  # seq -> {validation, time}
        self.latest: Optional[Dict[str, Any]] = None  # the latest arrived evaluated result

    # -- start -------------------------------------------------------------------------------

    def start(self) -> None:
        """Rank 0, before the first epoch: hold the queue, write the manifest, beat, start the sidecar."""
        if self.started or not _rank0():
            return
        self.started = True
        self._lock = self.queue.lock_trainer()
        plan = self.task.plan
        manifest = {"format": 1, "framework": "fairseq", "run_id": uuid.uuid4().hex,
                    "gold": {"path": os.path.abspath(self.cfg.nbest_gold), "digest": plan.gold.digest()},
                    "settings": {"task": task_settings(self.run_cfg)}, "stopping": rule_spec(self.stopping),
                    "queue": self.cfg.nbest_async_queue, "skip": bool(self.cfg.nbest_async_skip),
                    "trainer_device": "cpu" if self.run_cfg.common.cpu else "cuda",
                    "dtype": "float16" if self.run_cfg.common.fp16 else "bfloat16" if self.run_cfg.common.bf16
                    else "float32", "threads": torch.get_num_threads(), "save_lists": None}
        if os.path.lexists(self.queue.path("manifest.json")):
            self.queue.read_manifest()  # a resumed run's: checked, kept (slice 4 handles the rewind)
        else:
            self.queue.write_manifest(manifest)
        self.heartbeat = Heartbeat.of_trainer(self.queue, device=self.device).start()
        atexit.register(self.conclude, failed=True)
        if self.device != "external":
            self._start_child()
        skip = ", skipping older ones" if self.cfg.nbest_async_skip else ""
        who = "a sidecar you start (nbest-eval watch)" if self.device == "external" else f"a sidecar on {self.device}"
        logger.info(f"translation_nbest: async n-best validation: snapshots go to {self.queue.root} (at most "
                    f"{self.cfg.nbest_async_queue} waiting{skip}), evaluated by {who}")

    def _start_child(self) -> None:
        """``nbest-eval watch`` in a new session (Ctrl-C in the terminal does not cut it mid-write),
        importing this very package (a checkout's, where training uses one)."""
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        log = open(self.queue.path("sidecar.log"), "ab")
        self.child = subprocess.Popen([sys.executable, "-m", "nbest_eval", "watch", self.queue.root, "--device",
                                       self.device], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        log.close()

    # -- each validation -----------------------------------------------------------------------

    def after_validation(self, model: Any, stats: Dict[str, Any], epoch: int) -> None:
        """Hand off this validation's snapshot, show what arrived, set the valid line and carry out the verdict."""
        updates = int(stats.get("num_updates", 0))
        outcome = None
        if _rank0():
            self._check_child()
            self._hand_off(model, epoch, updates)
            outcome = self._arrived()
        outcome = _shared(outcome)
        self._set_stats(stats, outcome)

    def _hand_off(self, model: Any, epoch: int, updates: int) -> None:
        deadline = time.monotonic() + self.cfg.nbest_async_timeout
        while not self.queue.make_room(self.cfg.nbest_async_queue, self.cfg.nbest_async_skip, POLL_S, timeout=10.0):
            self._check_child()
            if time.monotonic() > deadline:
                raise RuntimeError(f"translation_nbest: the sidecar evaluated nothing for "
                                   f"{self.cfg.nbest_async_timeout} s; {len(self.queue.waiting())} snapshots wait "
                                   f"in {self.queue.root}")
        self.validations += 1
        info = {"handed_off_at": time.time(), "validation": self.validations, "device": self.device}
        state = snapshot_state(self.run_cfg, model, self.task, epoch, updates, info)
        entry = self.queue.put(lambda partial: torch.save(state, partial),
                               Tags(None, 0, updates, "u", epoch, ".pt"))
        self.handed[entry.seq] = info

    def _arrived(self) -> Dict[str, Any]:
        """The results that arrived since the last validation (logged), and the verdict now."""
        for seq, result in self.queue.results().items():
            if seq not in self.shown:
                self.shown.add(seq)
                self._show(seq, result)
        return {"latest": self.latest, "verdict": self.queue.read_verdict(), "pending": len(self.queue.waiting())}

    def _show(self, seq: int, result: Dict[str, Any]) -> None:
        tags = result["tags"]
        where = f"epoch {tags.get('epoch')}, update {tags.get('update')}"
        reason = result.get("skipped") or result.get("not_evaluated")
        if reason:
            logger.info(f"translation_nbest: sidecar: {where}: not evaluated: {reason}")
            return
        self.latest = {"update": tags.get("update"), "values": result["values"]}
        handed = self.handed.get(seq, {})
        lag_s = result["timings"].get("evaluated_at", time.time()) - handed.get("handed_off_at", time.time())
        lag_v = self.validations - handed.get("validation", self.validations)
        values = "  ".join(f"{k} {v:.4f}" if v is not None else f"{k} -" for k, v in result["values"].items())
        logger.info(f"translation_nbest: sidecar: {where}: {values} (arrived {lag_s:.0f} s, {lag_v} validation(s) "
                    f"after its hand-off)")

    def _set_stats(self, stats: Dict[str, Any], outcome: Dict[str, Any]) -> None:
        latest, verdict = outcome["latest"], outcome["verdict"]
        for key in self.task.scorer.keys:
            value = None if latest is None else latest["values"].get(key)
            stats[key] = 0.0 if value is None else float(value)
        if latest is not None:
            stats["nbest_of_update"] = latest["update"]
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
        carry_out_async(stop, value, maximize, self.cfg.patience)
        if stop:
            logger.info(f"translation_nbest: the sidecar's verdict is stop: {(verdict or {}).get('explain', '')}")

    # -- the end -------------------------------------------------------------------------------

    def _check_child(self) -> None:
        """A child sidecar that ended is reported at once and started again (its claim died with it, so
        nothing is lost or evaluated twice), at most :data:`RESTARTS` times; then the run fails."""
        if self.child is None or self.child.poll() is None:
            return
        code = self.child.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        said = f"the sidecar ended ({how}); its log, {self.queue.path('sidecar.log')}, ends:\n" \
               f"{_tail(self.queue.path('sidecar.log'))}"
        if self.restarts >= RESTARTS:
            raise RuntimeError(f"translation_nbest: {said}\nit was restarted {RESTARTS} times: giving up")
        self.restarts += 1
        logger.warning(f"translation_nbest: {said}\nstarting it again ({self.restarts} of {RESTARTS})")
        self._start_child()

    def conclude(self, failed: bool = False) -> None:
        """When training ends: wait (bounded) for the queue to be decided, say what is kept, stop the sidecar."""
        if not self.started or self.concluded:
            return
        self.concluded = True
        drained = failed or self._drain()
        if self.heartbeat is not None:
            self.heartbeat.stop("failed" if failed else "done")
        if self.child is not None:
            try:
                self.child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.child.terminate()
                self.child.wait()
        if failed:
            return
        verdict = self.queue.read_verdict() or {}
        kept = verdict.get("kept")
        if not drained:
            logger.warning(f"translation_nbest: the sidecar did not finish within {self.cfg.nbest_async_timeout} s; "
                           f"{len(self.queue.waiting())} snapshot(s) not evaluated in {self.queue.root}")
        if kept is None or kept.get("path") is None:
            logger.info("translation_nbest: async: no snapshot kept (no early-stopping rule, or no validation decided)")
            return
        path = os.path.join(self.queue.root, kept["path"])
        suffix = self.run_cfg.checkpoint.checkpoint_suffix or ""
        link = os.path.join(self.cfg.save_dir, f"checkpoint_best{suffix}.pt")
        how = link_best(path, link, force=True) if not os.path.isfile(link) or os.path.islink(link) else None
        logger.info(f"translation_nbest: checkpoint_best.pt: update {kept.get('step')} (epoch {kept.get('epoch')}), "
                    f"{self.stopping.conclusion(self._state(verdict), unit='update') if self.stopping else ''}; "
                    f"weights-only snapshot at {path} (no optimizer state: resume from it with --reset-optimizer; "
                    f"the queue holds {self.queue.disk_use() / 1e6:.1f} MB now)"
                    + ("" if how else f"; {link} is a file of its own and was left alone"))

    def _state(self, verdict: Dict[str, Any]):
        gold = self.task.plan.gold
        return self.stopping.restore(verdict["state"], self.task.scorer, gold.ids(), None, gold.digest())

    def _drain(self) -> bool:
        deadline = time.monotonic() + self.cfg.nbest_async_timeout
        last = max((e.seq for f in ("snapshots", "kept") for e in self.queue.entries(f)), default=0)
        last = max([last, *self.handed])
        while ((self.queue.read_verdict() or {}).get("decided_through", 0)) < last:
            try:
                self._check_child()
            except RuntimeError as err:
                logger.error(str(err))
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        self._arrived()
        return True


def carry_out_async(stop: bool, value: float, maximize: bool, patience: int) -> None:
    """fairseq's levers in async mode: ``should_stop_early`` stops now iff ``stop``; ``save_checkpoint``
    never finds ``value`` better than its best, so it never writes checkpoint_best.pt itself."""
    for fn in early_stopping._stop_early_functions():
        if stop:
            fn.best, fn.num_runs = early_stopping._beyond(value, maximize), max(patience, 1) - 1
        else:
            fn.best = None
    checkpoint_utils.save_checkpoint.best = early_stopping._beyond(value, maximize)


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return "".join(file.readlines()[-lines:])
    except OSError:
        return ""


