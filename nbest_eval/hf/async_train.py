"""The trainer's half of ``NBestEvalCallback(mode="async")`` (issue 33): at each evaluation the
callback hands a ``save_pretrained`` snapshot to the queue (:mod:`nbest_eval.training.handoff`)
instead of generating; a sidecar (:mod:`.async_eval`, run by ``nbest-eval watch``) evaluates it and
decides with the early-stopping rule, as the loop would.

What the Trainer sees:

- each evaluation's metrics get ``eval_nbest_pending`` (snapshots not yet evaluated) and, with an
  :class:`~nbest_eval.hf.early_stopping.NBestEarlyStoppingCallback`, ``eval_nbest_kept_step`` as the
  verdict has it so far (so ``metric_for_best_model="nbest_kept_step"`` finds its key);
- each result, when it arrives, becomes an entry of ``state.log_history`` at *its* step
  (``eval_map``, ..., ``eval_nbest_kept_step``, with ``nbest_lag_s``, ``nbest_lag_validations`` and
  ``nbest_arrived_step``), saved in every later ``trainer_state.json``, and a console line;
- a stop verdict sets ``control.should_training_stop`` at the next step (or evaluation);
- at the end of training the queue is drained (bounded), the kept snapshot becomes
  ``state.best_model_checkpoint`` (``best_global_step``, ``best_metric``: the rule's), and with
  ``load_best_model_at_end`` its weights are loaded into the model. The Trainer loads its own best
  just before ``on_train_end`` (it has no later hook), so this load replaces that one.

With several processes (torchrun, accelerate) rank 0 alone holds the queue: it hands off the
unwrapped model's weights, reads the arrivals and the verdict, and starts the child sidecar. At each
evaluation and at the end, every rank takes rank 0's news (a broadcast on a gloo group of its own,
which waits as long as rank 0 may wait for the sidecar), so every rank logs the same entries, stops
at the same step (the evaluation after the verdict arrives: no look between evaluations) and loads
the same kept snapshot.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ..data import InputError
from ..training.distributed import from_rank0, object_group
from ..training.handoff_files import Tags
from ..training.trainer_side import Arrival, TrainerSide, new_manifest
from .async_eval import SNAPSHOT_FILE, TOKENIZER
from .console import say
from .settings import settings_of

WHO = "NBestEvalCallback"
MODES = ("loop", "async")
#: how much longer than ``async_timeout`` the other ranks wait for rank 0's news: its wait for room or
#: for the drain is bounded by the timeout, plus writing a snapshot and waiting for the child to exit
NEWS_MARGIN_S = 600.0
#: the key of news that says rank 0 failed (:meth:`AsyncHandOff._from_rank0`)
FAILED = "failed"


class AsyncHandOff:
    """One training run's hand-offs for ``callback`` (an NBestEvalCallback in async mode)."""

    def __init__(self, callback: Any, device: Optional[str], queue: int, skip: bool, timeout: float):
        if not isinstance(queue, int) or isinstance(queue, bool) or queue < 1:
            raise InputError(f"async_queue must be a number of snapshots >= 1, got {queue!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise InputError(f"async_timeout must be a number of seconds > 0, got {timeout!r}")
        self.callback, self.device, self.k, self.skip, self.timeout = callback, device, queue, skip, timeout
        self.side: Optional[TrainerSide] = None  # rank 0's
        self.group: Any = None  # with several processes: the group rank 0's news goes out on
        self.pending = 0  # snapshots waiting, at the latest news
        self.prefixes: Dict[int, str] = {}  # seq -> the evaluation's metric prefix
        self._verdict_stamp: Any = None
        self.verdict: Optional[Dict[str, Any]] = None
        #: during training (every process): evaluations hand off; before and after it, evaluate() generates
        self.active = False

    # -- start -------------------------------------------------------------------------------

    def check(self, args: Any) -> None:
        """What async mode cannot do, refused before training (ValueError)."""
        evaluator = self.callback.evaluator
        unrecorded = settings_of(evaluator)["unrecorded"]
        if unrecorded:
            raise ValueError(f"mode='async': the sidecar rebuilds the evaluator from its recorded settings, and "
                             f"{', '.join(unrecorded)} cannot be recorded (a function or an object): use mode='loop'")
        if evaluator.full_gold.path is None:
            raise ValueError("mode='async': the gold must be a file (the sidecar reads it), not a Gold in memory")
        if str(getattr(args, "save_strategy", "")).endswith("best"):
            raise ValueError("mode='async': save_strategy='best' needs the measure at the evaluation, which arrives "
                             "later; save by steps or epochs (the kept snapshot is the rule's)")
        metric = (getattr(args, "metric_for_best_model", None) or "").removeprefix("eval_")
        name = self.callback.name
        if metric.removeprefix(f"{name}_" if name else "") in evaluator.scorer.keys:
            raise ValueError(f"mode='async': metric_for_best_model={args.metric_for_best_model!r} arrives after its "
                             f"evaluation; with an NBestEarlyStoppingCallback use metric_for_best_model="
                             f"'nbest_kept_step', or leave it unset: the model kept at the end is the rule's")

    def start(self, trainer: Any, args: Any) -> None:
        """Every rank: the news group; rank 0: the queue (:meth:`_start`)."""
        self.active = True
        if args.world_size > 1 and self.group is None:
            self.group = object_group(self.timeout + NEWS_MARGIN_S)
        self._from_rank0(lambda: self._start(trainer, args) if args.process_index == 0 else None,
                         "start async mode")

    def _from_rank0(self, work: Callable[[], Any], what: str) -> Any:
        """``work()``, which does something on rank 0 only, and what it returns there, on every rank. With
        several processes a failure in it is raised on every rank (the others say what rank 0 could not
        do), so that none waits in a broadcast for news that will not come."""
        if self.group is None:
            return work()
        error = news = None
        try:
            news = work()
        except Exception as err:  # re-raised below, after the other ranks heard of it
            error = err
        told = self._share({FAILED: f"{type(error).__name__}: {error}"} if error is not None else news)
        if error is not None:
            raise error
        if isinstance(told, dict) and FAILED in told:
            raise RuntimeError(f"{WHO}: rank 0 could not {what}: {told[FAILED]}")
        return told

    def _start(self, trainer: Any, args: Any) -> None:
        """Rank 0: the queue, the tokenizer (once), the manifest, the heartbeat and the child sidecar."""
        if self.side is not None and self.side.started:
            return
        device = self.device or ("cpu" if args.use_cpu or not torch.cuda.is_available() else "cuda:0")
        self.side = TrainerSide(args.output_dir, device, self.k, self.skip, self.timeout, WHO, unit="step",
                                tensorboard_logdir=tensorboard_logdir(args))
        evaluator = self.callback.evaluator
        tokenizer_dir = self.side.queue.path(TOKENIZER)
        if not os.path.isdir(tokenizer_dir):
            self.side.queue.create()
            evaluator.tokenizer.save_pretrained(tokenizer_dir)
        stopping = self.callback.stopping_callback()
        lists = None if self.callback.save_dir is None else \
            {"dir": os.path.abspath(self.callback.save_dir), "format": self.callback.save_format,
             "name": self.callback.name}
        manifest = new_manifest("hf", evaluator.full_gold.path, evaluator.full_gold.digest(), settings_of(evaluator),
                                None if stopping is None else stopping.stopping, self.k, bool(self.skip),
                                trainer_device=torch.device(device).type if device != "external" else "cpu",
                                dtype="float16" if args.fp16 else "bfloat16" if args.bf16 else "float32",
                                threads=torch.get_num_threads(), save_lists=lists,
                                # without a rule the best model is the Trainer's, by its loss: the sidecar keeps none
                                best=None if stopping is not None else {"metric": None})
        self.side.start(manifest, lambda: self.side.conclude(failed=True), resumed_at=trainer.state.global_step,
                        saved_at=_last_saved_at(args))

    # -- each evaluation ---------------------------------------------------------------------

    def hand_off(self, trainer: Any, model: Any, prefix: str) -> Dict[str, float]:
        """Hand this evaluation's snapshot off; the metrics it logs now (see the module docstring)."""
        state = trainer.state

        def render(partial: str, info: Dict[str, Any]) -> None:
            model.save_pretrained(partial)
            with open(os.path.join(partial, SNAPSHOT_FILE), "w", encoding="utf-8") as file:
                json.dump({**info, "epoch": state.epoch, "step": state.global_step}, file)

        def on_rank0() -> Optional[Dict[str, Any]]:
            if self.side is not None:
                entry = self.side.hand_off(render, Tags(None, 0, state.global_step, "s"))
                self.prefixes[entry.seq] = prefix
            return self._news(state)

        self._take(state, self._from_rank0(on_rank0, f"hand off step {state.global_step}"))
        head = f"{prefix}_{self.callback.name}_" if self.callback.name else f"{prefix}_"
        metrics = {f"{head}nbest_pending": float(self.pending)}
        stopping = self.callback.stopping_callback()
        if stopping is not None:
            kept = (self.verdict or {}).get("kept") or {}
            metrics[f"eval_{stopping.kept_step_key}"] = float(kept.get("step") or 0)
        return metrics

    def arrivals(self, state: Any) -> None:
        """Log the results that arrived into ``state.log_history`` and on the console (with several
        processes: every rank, together)."""
        self._take(state, self._share(self._news(state)))

    def _share(self, news: Any) -> Any:
        """Rank 0's ``news`` on every rank (with one process: itself)."""
        return news if self.group is None else from_rank0(news, self.group)

    def _news(self, state: Any) -> Optional[Dict[str, Any]]:
        """Rank 0: the verdict, what arrived (log entries and console lines) and how many snapshots
        wait; None on the other ranks."""
        if self.side is None:
            return None
        verdict = self.side.queue.read_verdict()
        logged = [self._logged(state, arrival) for arrival in self.side.arrived()]
        return {"verdict": verdict, "logged": logged, "pending": len(self.side.queue.waiting())}

    def _take(self, state: Any, news: Optional[Dict[str, Any]]) -> None:
        if news is None:
            return
        self.verdict, self.pending = news["verdict"], news["pending"]
        for entry, line in news["logged"]:
            if entry is not None:
                state.log_history.append(entry)
            say(state, line)

    def _logged(self, state: Any, arrival: Arrival) -> Tuple[Optional[Dict[str, Any]], str]:
        """An arrival's ``state.log_history`` entry (None when it was not evaluated) and console line."""
        result, tags = arrival.result, arrival.result["tags"]
        step = tags.get("step")
        if arrival.reason:
            return None, f"n-best (async): step {step} not evaluated: {arrival.reason}"
        prefix = self.prefixes.get(arrival.seq, "eval")
        head = f"{prefix}_{self.callback.name}_" if self.callback.name else f"{prefix}_"
        entry: Dict[str, Any] = {f"{head}{k}": 0.0 if v is None else float(v) for k, v in result["values"].items()}
        decision = arrival.decision
        stopping = self.callback.stopping_callback()
        if stopping is not None and decision is not None:
            entry[f"eval_{stopping.kept_step_key}"] = float(decision["state_after"]["kept_step"])
        entry.update(nbest_lag_s=arrival.lag_s, nbest_lag_validations=arrival.lag_validations,
                     nbest_arrived_step=state.global_step, step=step)
        shown = ", ".join(f"{k}={v:.4f}" for k, v in entry.items() if k.startswith(head))
        explain = f"; {decision['explain']}" if decision and decision.get("explain") else ""
        return entry, (f"n-best (async) at step {step}: {shown} (arrived at step {state.global_step}, "
                       f"{arrival.lag_s:.0f} s after its hand-off){explain}")

    def poll(self, state: Any, control: Any) -> None:
        """Each step and evaluation: stop training on a stop verdict. With one process, first a look at
        ``verdict.json`` (an ``os.stat``; read only when it changed) and show what arrived; with
        several, the verdict is the one every rank took at the last evaluation."""
        if self.side is not None and self.group is None:
            try:
                stat = os.stat(self.side.queue.path("verdict.json"))
                stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            except OSError:
                stamp = None
            if stamp != self._verdict_stamp:
                self._verdict_stamp = stamp
                self.arrivals(state)
        if (self.verdict or {}).get("stop") and not control.should_training_stop:
            say(state, f"n-best (async): the sidecar's verdict is stop: {self.verdict.get('explain', '')}")
            control.should_training_stop = True

    # -- the end -------------------------------------------------------------------------------

    def conclude(self, trainer: Any, args: Any, state: Any) -> None:
        """Drain, show the last results, make the kept snapshot the Trainer's best (and load it): on
        every rank, from rank 0's news (the kept folder must be visible to every rank)."""
        self.active = False

        def on_rank0() -> Optional[Dict[str, Any]]:
            if self.side is not None and self.side.conclude() is not None:
                return {**self._news(state), "root": self.side.queue.root, "disk": self.side.queue.disk_use()}
            return None

        news = self._from_rank0(on_rank0, "drain the queue")
        if news is None:
            return
        self._take(state, news)
        kept = (self.verdict or {}).get("kept")
        if not kept or not kept.get("path"):
            say(state, "n-best (async): no snapshot kept (no NBestEarlyStoppingCallback, or nothing decided)")
            return
        folder = os.path.join(news["root"], kept["path"])
        state.best_model_checkpoint, state.best_metric = folder, kept.get("value")
        if hasattr(state, "best_global_step"):
            state.best_global_step = kept.get("step")
        say(state, f"n-best (async): kept step {kept.get('step')} ({self.verdict.get('explain', '')}); its weights "
                   f"are in {folder} (the queue holds {news['disk'] / 1e6:.1f} MB now)")
        if args.load_best_model_at_end:
            trainer._load_best_model()  # the Trainer's own loader (safetensors, shards, adapters), from the kept folder


def _last_saved_at(args: Any):
    """When the newest ``checkpoint-*`` folder, what ``resume_from_checkpoint=True`` reads, was written
    (its ``trainer_state.json``; a callable); None when the run saves none: no resume is rolled back then."""
    strategy = getattr(args, "save_strategy", None)
    if getattr(strategy, "value", strategy) == "no":
        return None
    from transformers.trainer_utils import get_last_checkpoint

    def written() -> Optional[float]:
        last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
        try:
            return None if last is None else os.stat(os.path.join(last, "trainer_state.json")).st_mtime
        except FileNotFoundError:
            return None
    return written


def tensorboard_logdir(args: Any) -> Optional[str]:
    """Where the Trainer's TensorBoard writes, when it reports there: ``logging_dir`` (transformers 4),
    else ``$TENSORBOARD_LOGGING_DIR``, else ``OUTPUT_DIR/runs`` (transformers 5 adds a run folder below it)."""
    if "tensorboard" not in (getattr(args, "report_to", None) or []):
        return None
    return getattr(args, "logging_dir", None) or os.environ.get("TENSORBOARD_LOGGING_DIR") or \
        os.path.join(args.output_dir, "runs")
