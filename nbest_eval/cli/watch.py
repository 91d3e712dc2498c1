"""Evaluate the snapshots a training run hands off (--nbest-mode async), in order, each once.

    nbest-eval watch RUN_DIR [--device cpu|cuda:N] [--data DATA_BIN] [--gold GOLD] [--tensorboard-logdir DIR]

RUN_DIR is the run's save dir (or its nbest-async/ folder). The run's manifest says what to
evaluate with: the framework, the task settings (generation, scorer, prompts) and the early-stopping
rule, so the lists, values and decisions are the loop's. Each result is printed as a line when it is
placed; the rule's state and verdict, and the snapshot it keeps (nbest-async/kept/), are written
beside them; with --tensorboard-logdir, its measures as TensorBoard scalars at its update, beside
the trainer's own (:mod:`~nbest_eval.training.scalars`). Several watch processes may share one run
directory, and one may start before its trainer (it waits for the run's manifest). The command ends
once the queue is drained and the trainer is done (or, with --until drained, as soon as the queue is
empty); status 3 when the trainer died without saying so.

Under torchrun (WORLD_SIZE > 1) the prompts are sharded over the processes (gloo on the CPU; with
--device cuda, nccl and cuda:LOCAL_RANK): rank 0 alone claims, writes and decides, and names each
snapshot to the others; every rank validates its shard (see docs/async.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from ..data import InputError
from ..formats import read_gold
from ..scorer import Scorer, parse_metric_list
from ..training.handoff import Queue
from ..training.heartbeat import Heartbeat
from ..training.scalars import Scalars, summary_writer
from ..training.sidecar import UNTIL, BestValue, Leader, ListsEvaluator, follow, rule_from_manifest, watch

#: a test hook, not a user option: seconds the sidecar sleeps in each evaluation (holding its claim),
#: so that tests can make it fall behind its trainer (--nbest-async-queue, --nbest-async-skip)
DELAY_ENV = "NBEST_EVAL_SIDECAR_DELAY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the training run's save dir, or its nbest-async/ folder")
    parser.add_argument("--device", default="cpu",
                        help="where to generate: cpu or cuda[:N] (default: cpu); under torchrun cpu or cuda "
                             "(each process on cuda:LOCAL_RANK)")
    parser.add_argument("--data", help="the binarized data, where it moved since training (fairseq)")
    parser.add_argument("--gold", help="the gold file, where it moved since training")
    parser.add_argument("--scoring", choices=("inline", "helper"), default="inline",
                        help="score on the generating thread (inline, the default: on a small machine the trainer "
                             "has the other core) or in a helper process beside generation (helper)")
    parser.add_argument("--until", choices=UNTIL, default="trainer-done",
                        help="end when the trainer is done and the queue drained (default), or once it is drained")
    parser.add_argument("--threads", type=int,
                        help="intra-op threads for generation (default: the trainer's, which the manifest records; "
                             "the same count keeps the lists the loop's)")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between looks at an empty queue")
    parser.add_argument("--tensorboard-logdir", metavar="DIR",
                        help="write each result's measures, lag and timings as TensorBoard scalars at its update "
                             "(step), in DIR/valid_sidecar (fairseq; DIR: the run's own --tensorboard-logdir) or "
                             "DIR/eval_sidecar (Hugging Face; DIR: its logging_dir)")
    parser.add_argument("--trust-checkpoints", action="store_true",
                        help="load snapshots with full unpickling (runs code stored in them): only for your own")


def run(args: argparse.Namespace) -> int:
    with _process_group(args.device, _env_int("WORLD_SIZE", 1)) as (rank, device):
        if rank:
            return _follow(args, device, rank)
        return _watch(args, device, rank)


def _watch(args: argparse.Namespace, device: str, rank: Optional[int]) -> int:
    """Rank 0 (or the only process): claim, evaluate, write, decide."""
    delay = _delay()
    writer = summary_writer() if args.tensorboard_logdir else None  # refused now, not once a run hands off
    queue = Queue(args.run_dir)
    manifest = _manifest(queue, args)
    evaluator = _slowed(_evaluator(manifest, args, device, rank), delay)
    scalars = None if writer is None else Scalars(args.tensorboard_logdir, *_scalar_layout(manifest, evaluator),
                                                  writer=writer)
    leader = None if rank is None else Leader(evaluator, _from_rank0())

    def on_result(seq: int, result: Dict[str, Any]) -> None:
        print(result_line(seq, result), flush=True)
        if scalars is not None:
            scalars.write(result)

    heartbeat = Heartbeat.of_sidecar(queue, device=device).start()
    try:
        summary = watch(queue, leader or evaluator, rule_from_manifest(manifest["stopping"]), until=args.until,
                        best=BestValue.from_manifest(manifest), poll=args.poll, on_result=on_result,
                        sleep=time.sleep if leader is None else leader.sleep)
    except BaseException:
        heartbeat.stop("failed")
        raise
    finally:
        for closing in (evaluator, scalars):
            close = getattr(closing, "close", None)
            if close is not None:
                close()
    if leader is not None:
        leader.stop()
    heartbeat.stop("done")
    verdict = summary.verdict or {}
    kept = verdict.get("kept")
    keeping = f"; keeping {kept['path']}" if kept and kept.get("path") else ""
    print(f"watch: {len(summary.evaluated)} evaluated, {len(summary.not_evaluated)} not evaluated (after the stop "
          f"verdict); {summary.reason}{keeping}", flush=True)
    return 3 if summary.reason == "trainer-dead" else 0


def _follow(args: argparse.Namespace, device: str, rank: int) -> int:
    """Another rank: evaluate its shard of each snapshot rank 0 names, until rank 0 is done."""
    manifest = _manifest(Queue(args.run_dir), args)
    evaluator = _evaluator(manifest, args, device, rank)
    hear = _from_rank0()
    try:
        count = follow(evaluator, lambda: hear(None))
    finally:
        evaluator.close()
    print(f"watch: rank {rank} validated its shard of {count} snapshots", flush=True)
    return 0


def _from_rank0() -> Callable[[Any], Any]:
    """Rank 0's message to every rank (:func:`nbest_eval.training.distributed.from_rank0`), imported
    only under torchrun (the command line loads no framework)."""
    from ..training.distributed import from_rank0

    return from_rank0


def _check_device(device: str) -> None:
    """A CUDA device where torch sees none is refused now, not in torch's depths at the first snapshot."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"--device {device}: torch sees no CUDA device (torch.cuda.is_available() is False); "
                             f"use --device cpu")


@contextlib.contextmanager
def _process_group(device: str, size: int) -> Iterator[Tuple[Optional[int], str]]:
    """(rank, this process's device): in one process (None, ``device``); on
    ``size`` > 1 (under torchrun) with torch.distributed's default group up meanwhile (gloo on the CPU;
    nccl with --device cuda, each process on cuda:LOCAL_RANK). Its timeouts are torch's defaults."""
    if size > 1 and device not in ("cpu", "cuda"):
        raise InputError(f"under torchrun --device is cpu or cuda (each process takes cuda:LOCAL_RANK), not {device!r}")
    _check_device(device)
    if size <= 1:
        yield None, device
        return
    import torch
    import torch.distributed as dist

    if device == "cuda":
        device = f"cuda:{_env_int('LOCAL_RANK', 0)}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield dist.get_rank(), device
    finally:
        dist.destroy_process_group()


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "")
    try:
        return int(text) if text else default
    except ValueError:
        raise InputError(f"the environment's {name} is not a whole number: {text!r}") from None


def _manifest(queue: Queue, args: argparse.Namespace) -> Dict[str, Any]:
    """The run's manifest; by default waited for (a sidecar may start before its trainer), with
    --until drained an error where there is none."""
    path = queue.path("manifest.json")
    said = False
    while not os.path.lexists(path):
        if args.until == "drained":
            raise InputError("no hand-off queue here (a run with --nbest-mode async makes one)", queue.root)
        if not said:
            print(f"watch: waiting for a run to hand off to {queue.root}", flush=True)
            said = True
        time.sleep(args.poll)
    return queue.read_manifest()


def _evaluator(manifest: Dict[str, Any], args: argparse.Namespace, device: str, rank: Optional[int] = None) -> Any:
    """The framework's evaluator, imported only now (the command line loads no framework); ``rank``:
    this process's under torchrun (None: the only process)."""
    if manifest["framework"] == "fairseq":
        from ..fairseq.async_eval import FairseqSnapshotEvaluator

        _set_threads(manifest, args)
        return FairseqSnapshotEvaluator.from_manifest(manifest, data=args.data, gold=args.gold, device=device,
                                                      scoring=args.scoring, trust=args.trust_checkpoints)
    if manifest["framework"] == "hf":
        from ..hf.async_eval import HFSnapshotEvaluator

        _set_threads(manifest, args)
        return HFSnapshotEvaluator.from_manifest(manifest, Queue(args.run_dir), gold=args.gold, device=device)
    if manifest["framework"] == "lists":  # n-best files as snapshots: settings {"metrics": [...], "format": ...}
        if rank is not None:
            raise InputError("n-best files cannot be sharded over processes: watch them in one", args.run_dir)
        settings = manifest.get("settings") or {}
        gold = read_gold(args.gold or (manifest.get("gold") or {}).get("path") or "")
        return ListsEvaluator(gold, Scorer(parse_metric_list(settings.get("metrics", ""))),
                              settings.get("format", "auto"))
    raise InputError(f"watching a {manifest['framework']} run is not supported yet", args.run_dir)


def _scalar_layout(manifest: Dict[str, Any], evaluator: Any) -> Tuple[str, str]:
    """(run folder, tag prefix) of the scalars: beside the trainer's own, with its tags (see
    :mod:`~nbest_eval.training.scalars`)."""
    if manifest["framework"] == "hf":
        return "eval_sidecar", "eval/"
    return f"{getattr(evaluator, 'subset', 'valid')}_sidecar", ""


def _delay() -> float:
    """The seconds :data:`DELAY_ENV` asks for (0 where it is not set)."""
    text = os.environ.get(DELAY_ENV, "")
    try:
        seconds = float(text or 0)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise InputError(f"{DELAY_ENV} must be a number of seconds >= 0, got {text!r}")
    return seconds


def _slowed(evaluator: Any, seconds: float) -> Any:
    """``evaluator``, sleeping ``seconds`` before each evaluation (the :data:`DELAY_ENV` test hook)."""
    if seconds:
        evaluate = evaluator.evaluate

        def slow(path: str, tags: Any) -> Any:
            time.sleep(seconds)
            return evaluate(path, tags)

        evaluator.evaluate = slow
    return evaluator


def _set_threads(manifest: Dict[str, Any], args: argparse.Namespace) -> None:
    """Intra-op threads: --threads, else the trainer's (the same count keeps the lists the loop's)."""
    import torch

    threads = args.threads or manifest.get("threads")
    if isinstance(threads, int) and threads > 0:
        torch.set_num_threads(threads)


def result_line(seq: int, result: Dict[str, Any]) -> str:
    """One line a result: which snapshot, its values, how long it took."""
    tags = result["tags"]
    step = f"update {tags['update']}" if "update" in tags else f"step {tags.get('step')}"
    epoch = "" if tags.get("epoch") is None else f"epoch {tags['epoch']}, "
    values = "  ".join(f"{key} {'-' if value is None else format(value, '.4f')}"
                       for key, value in result["values"].items())
    return f"{seq:6d}  {epoch}{step}: {values}  ({result['timings'].get('evaluate_s', 0.0):.1f} s)"
