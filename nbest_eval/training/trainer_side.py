"""The trainer's half of async n-best validation (issue 33), framework-free: what the fairseq task
(:mod:`nbest_eval.fairseq.async_train`) and the Hugging Face callback (:mod:`nbest_eval.hf.async_train`)
do alike. It holds the queue for the run (``trainer.lock``), writes the manifest, beats, starts the
child sidecar (``nbest-eval watch``) and starts it again when it ends, hands snapshots off within the
queue's bound, collects the results that arrived (with their lag) and, at the end, waits for the
queue to be decided. The adapters only render snapshots, show results and pull their framework's levers.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

from ..data import InputError
from .early_stopping import EarlyStopping
from .handoff import Entry, Queue, remove
from .handoff_files import Tags, read_json
from .heartbeat import STALE_S, Heartbeat, Liveness, read_heartbeat
from .rewind import rewind
from .sidecar import BestValue, fresh_verdict, rule_from_manifest
from .timeline import meanwhile

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


def new_manifest(framework: str, gold_path: Optional[str], gold_digest: str, settings: Mapping[str, Any],
                 stopping: Optional[EarlyStopping], queue: int, skip: bool, **run: Any) -> Dict[str, Any]:
    """A manifest (``run``: trainer_device, dtype, threads, save_lists)."""
    return {"format": 1, "framework": framework, "run_id": uuid.uuid4().hex,
            "gold": {"path": None if gold_path is None else os.path.abspath(gold_path), "digest": gold_digest},
            "settings": dict(settings), "stopping": rule_spec(stopping), "queue": queue, "skip": skip,
            "save_lists": None, **run}


@dataclass
class Arrival:
    """A result that arrived: its seq, the result, its lag in seconds and in validations (hand-offs
    meanwhile), and the rule's decision on it (None: no rule, or not evaluated)."""

    seq: int
    result: Dict[str, Any]
    lag_s: float
    lag_validations: int
    decision: Optional[Dict[str, Any]] = None

    @property
    def reason(self) -> Optional[str]:
        """Why it was not evaluated (skipped, after the stop verdict), or None."""
        return self.result.get("skipped") or self.result.get("not_evaluated")


class TrainerSide:
    """One run's hand-offs (rank 0 only). ``device``: where the child sidecar generates, or "external"
    (none is started); ``who``: the prefix of messages ("translation_nbest", "NBestEvalCallback");
    ``tensorboard_logdir``: where the child sidecar writes its scalars (the run's own TensorBoard folder)."""

    def __init__(self, run_dir: str, device: str, queue: int, skip: bool, timeout: float, who: str,
                 unit: str = "update", clock: Callable[[], float] = time.monotonic,
                 tensorboard_logdir: Optional[str] = None):
        self.queue = Queue(run_dir)
        self.tensorboard_logdir = tensorboard_logdir
        self.device, self.k, self.skip, self.timeout, self.who, self.unit = device, queue, skip, timeout, who, unit
        self.gen = 0  # one up at each resume of the run
        #: when the file a resume reads was last written (None: never); the step it covers at least
        self.saved_at: Optional[Callable[[], Optional[float]]] = None
        self.saved_through: Optional[int] = None
        self.sidecars: Dict[str, Liveness] = {}  # an external sidecar's heartbeat file -> its liveness
        self.clock = clock
        self.since: Optional[float] = None  # this clock at the first look for an external sidecar
        self.started = self.concluded = False
        self.heartbeat: Optional[Heartbeat] = None
        self.child: Optional[subprocess.Popen] = None
        self.restarts = 0
        self.shown: Set[int] = set()  # seqs whose results were collected (sidecars may place them out of order)
        self.validations = 0  # validations handed off so far
        self.handed: Dict[int, Dict[str, Any]] = {}  # seq -> {validation, handed_off_at}

    def start(self, manifest: Mapping[str, Any], on_exit: Callable[[], None], resumed_at: Optional[int] = None,
              saved_at: Optional[Callable[[], Optional[float]]] = None) -> None:
        """Hold the queue, write the manifest, beat, start the sidecar; ``on_exit`` runs at interpreter
        exit (a crash: the run failed). ``resumed_at``: the step training starts from; a queue already
        there (a resumed run's) keeps its manifest and is rewound to it (:mod:`.rewind`; None: kept
        as it is). ``saved_at``: when the checkpoint a resume reads was last written (None if it is
        not there), which tells the sidecar what it may delete (``saved_through``)."""
        if self.started:
            return
        self.started = True
        self._lock = self.queue.lock_trainer()
        self._remove_staging()
        if not os.path.lexists(self.queue.path("manifest.json")):
            self.queue.write_manifest(manifest)
        elif resumed_at is not None:
            self._rewind(self.queue.read_manifest(), resumed_at)
        else:
            self.queue.read_manifest()  # checked, kept
        self.saved_at = saved_at
        self.saved_through = None if saved_at is None else resumed_at or 0
        self.heartbeat = Heartbeat.of_trainer(self.queue, device=self.device, gen=self.gen,
                                              saved_through=self.saved_through).start()
        atexit.register(on_exit)
        if self.device != "external":
            self._start_child()
        skip = ", skipping older ones" if self.skip else ""
        by = "a sidecar you start (nbest-eval watch)" if self.device == "external" else f"a sidecar on {self.device}"
        logger.info(f"{self.who}: async n-best validation: snapshots go to {self.queue.root} (at most {self.k} "
                    f"waiting{skip}), evaluated by {by}")

    def _remove_staging(self) -> None:
        """Staging folders in ``snapshots/``: a hand-off cut short (this process holds ``trainer.lock``,
        so no other trainer is writing one)."""
        folder = self.queue.path("snapshots")
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            if name.startswith(".") and name.endswith(".partial"):
                remove(os.path.join(folder, name))

    def _rewind(self, manifest: Mapping[str, Any], resumed_at: int) -> None:
        fresh = fresh_verdict(rule_from_manifest(manifest["stopping"]), BestValue.from_manifest(manifest))
        record = rewind(self.queue, resumed_at, fresh, self.timeout)
        self.gen = record["gen"]
        through = (self.queue.read_verdict() or {}).get("decided_through", 0)
        self.shown.update(seq for seq in self.queue.results() if seq <= through)  # the stopped trainer showed them
        logger.info(f"{self.who}: resumed at {self.unit} {resumed_at}: generation {self.gen} of {self.queue.root}; "
                    f"{len(record['superseded'])} later validation(s) set aside (results/superseded-g{self.gen}/), "
                    f"the verdict rolled back to before them")
        if record["kept_gone"] is not None:
            logger.error(f"{self.who}: the snapshot the rule kept at {self.unit} {resumed_at} (seq "
                         f"{record['kept_gone']}) was deleted before this resume (training resumed from an older "
                         f"checkpoint than the last one saved): its weights are gone, and no checkpoint_best "
                         f"can be made from it")

    def _start_child(self) -> None:
        """``nbest-eval watch`` in a new session (Ctrl-C in the terminal does not cut it mid-write),
        importing this very package (a checkout's, where training uses one)."""
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {name: value for name, value in os.environ.items() if not _torchrun_variable(name)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        log = open(self.queue.path("sidecar.log"), "ab")
        scalars = ["--tensorboard-logdir", self.tensorboard_logdir] if self.tensorboard_logdir else []
        self.child = subprocess.Popen([sys.executable, "-m", "nbest_eval", "watch", self.queue.root, "--device",
                                       self.device, *scalars], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        log.close()

    def check_child(self) -> None:
        """A child sidecar that ended is reported at once and started again (its claim died with it, so
        nothing is lost or evaluated twice), at most :data:`RESTARTS` times; then the run fails."""
        if self.child is None or self.child.poll() is None:
            return
        code = self.child.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        said = f"the sidecar ended ({how}); its log, {self.queue.path('sidecar.log')}, ends:\n" \
               f"{tail(self.queue.path('sidecar.log'))}"
        if self.restarts >= RESTARTS:
            raise RuntimeError(f"{self.who}: {said}\nit was restarted {RESTARTS} times: giving up")
        self.restarts += 1
        logger.warning(f"{self.who}: {said}\nstarting it again ({self.restarts} of {RESTARTS})")
        self._start_child()

    def hand_off(self, render: Callable[[str, Dict[str, Any]], None], tags: Tags) -> Entry:
        """Wait for room (bounded by the timeout, checking the child), then put the snapshot that
        ``render(partial, info)`` writes (``info``: handed_off_at, validation, device: record it in it)."""
        self.check_child()
        self._note_saved()
        if self.device == "external":
            self.check_sidecars()
        deadline = time.monotonic() + self.timeout
        while not self.queue.make_room(self.k, self.skip, POLL_S, timeout=10.0):
            self.check_child()
            if self.device == "external":
                self.check_sidecars()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.who}: the sidecar evaluated nothing for {self.timeout} s; "
                                   f"{len(self.queue.waiting())} snapshots wait in {self.queue.root}")
        self.validations += 1
        info = {"handed_off_at": time.time(), "validation": self.validations, "device": self.device}
        entry = self.queue.put(lambda partial: render(partial, info), replace(tags, gen=self.gen))
        self.handed[entry.seq] = {**info, "step": tags.step}
        return entry

    def _note_saved(self) -> None:
        """``saved_through``: the step of the last hand-off before the checkpoint a resume reads was
        last written (the frameworks save after validating; it covers that step or a later one)."""
        written = None if self.saved_at is None else self.saved_at()
        if written is None or self.heartbeat is None:
            return
        saved = max([self.saved_through or 0, *(info["step"] for info in self.handed.values()
                                                if info["handed_off_at"] < written)])
        if saved != self.saved_through:
            self.saved_through = saved
            self.heartbeat.beat(saved_through=saved)

    def check_sidecars(self) -> bool:
        """With an external sidecar: warn when none is alive (its heartbeat, ``sidecars/*.json``, has not
        moved for a minute of this clock, or its process is gone from this host), or, before any has
        beaten, once training has run for that minute. Whether one is alive."""
        folder = self.queue.path("sidecars")
        alive = seen = False
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            try:
                record = read_heartbeat(os.path.join(folder, name))
            except InputError:
                continue
            seen = seen or record is not None
            liveness = self.sidecars.setdefault(name, Liveness(clock=self.clock))
            alive = alive or (record is not None and record["state"] != "done" and liveness.alive(record))
        if self.since is None:
            self.since = self.clock()
        if not alive and (seen or self.clock() - self.since >= STALE_S):
            logger.warning(f"{self.who}: no live sidecar: {len(self.queue.waiting())} snapshot(s) waiting in "
                           f"{self.queue.root} (start one: nbest-eval watch {self.queue.root})")
        return alive

    def arrived(self) -> List[Arrival]:
        """The results decided since the last call, in seq order. Decided, not just placed: a sidecar
        places a result, then writes its decision, and the two are shown together."""
        through = (self.queue.read_verdict() or {}).get("decided_through", 0)  # before listing the results
        found = []
        for seq, result in self.queue.results().items():
            if seq in self.shown or seq > through:
                continue
            self.shown.add(seq)
            start = self.handed.get(seq, {}).get("handed_off_at", time.time())
            end = result.get("timings", {}).get("evaluated_at", time.time())
            # counted from the sidecar's times: the trainer notices a result only at its next validation
            later = meanwhile(start, end, (info["handed_off_at"] for info in self.handed.values()))
            found.append(Arrival(seq, result, end - start, later, self._decision(seq)))
        return found

    def _decision(self, seq: int) -> Optional[Dict[str, Any]]:
        """The rule's decision on ``seq`` (its explanation and ``state_after``), or None."""
        try:
            data = read_json(self.queue.path("decisions", f"{seq:06d}.json"), "hand-off decision")
        except InputError:
            return None
        return data if isinstance(data, dict) and isinstance(data.get("state_after"), dict) else None

    def last_seq(self) -> int:
        last = max((e.seq for f in ("snapshots", "kept") for e in self.queue.entries(f)), default=0)
        return max([last, *self.handed])

    def drain(self) -> bool:
        """Wait (bounded by the timeout) until every hand-off is decided; False when it was not."""
        deadline = time.monotonic() + self.timeout
        last = self.last_seq()
        while ((self.queue.read_verdict() or {}).get("decided_through", 0)) < last:
            try:
                self.check_child()
            except RuntimeError as err:
                logger.error(str(err))
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True

    def conclude(self, failed: bool = False) -> Optional[bool]:
        """At the end: drain (unless ``failed``), say done (or failed) to the sidecar and wait for the
        child. Whether it drained; None when there was nothing to conclude (not started, or done already)."""
        if not self.started or self.concluded:
            return None
        self.concluded = True
        drained = failed or self.drain()
        self._note_saved()
        if self.heartbeat is not None:
            self.heartbeat.stop("failed" if failed else "done")
        if self.child is not None:
            try:
                self.child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.child.terminate()
                self.child.wait()
        if not drained:
            logger.warning(f"{self.who}: the sidecar did not finish within {self.timeout} s; "
                           f"{len(self.queue.waiting())} snapshot(s) not evaluated in {self.queue.root}")
        return drained


def tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return "".join(file.readlines()[-lines:])
    except OSError:
        return ""


def _torchrun_variable(name: str) -> bool:
    """Whether ``name`` is torchrun's (the process group of a trainer it started): not for a child
    sidecar, which is one process of its own and would wait for the trainer's peers."""
    return name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                    "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") or name.startswith("TORCHELASTIC_")
