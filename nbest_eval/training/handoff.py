"""The hand-off queue on disk (issue 33): training puts weights-only snapshots into
``RUN_DIR/nbest-async/`` and a sidecar evaluates each one exactly once, off the training clock.

The layout (docs: /work/notes/33-design.md, section 1)::

    manifest.json         the run's settings, written once by the trainer
    snapshots/NAME        waiting and in-evaluation snapshots (a file or a folder), NAME as :data:`NAME`
    claims/SEQ.lock       flock'ed by the sidecar evaluating SEQ (the kernel frees it when it dies)
    results/SEQ.json      one immutable result per evaluated (or skipped) snapshot
    decisions/SEQ.json    the rule's decision on it; verdict.json the rule's state and what it keeps
    kept/NAME             the snapshots the rule keeps

Every file is put in place by a rename (:func:`~nbest_eval.files.output.write_file`), so no reader
sees half a snapshot or half a result; readers list only names matching :data:`NAME`, never the
private staging folders beside them. Everything read here is input: a damaged or foreign file is an
InputError naming it. Power loss is out of scope (no fsync).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set

from ..data import InputError
from ..files.locks import locked, try_lock
from ..files.output import write_file, write_text
from .handoff_files import Tags, check_manifest, check_result, check_verdict, json_text, read_json

logger = logging.getLogger(__name__)

FOLDER = "nbest-async"
SKIPPED = "newer snapshot (--nbest-async-skip)"
#: test-only: ``POINT:SEQ`` makes :func:`fault` SIGKILL the process at that point for that snapshot
FAULT_ENV = "NBEST_EVAL_FAULT"
#: a folder of results (and one of decisions) that a resumed trainer set aside: ``superseded-g{gen}``
SUPERSEDED = re.compile(r"superseded-g(\d+)")


def fault(point: str, seq: Optional[int]) -> None:
    """Test-only: die by SIGKILL here when ``NBEST_EVAL_FAULT`` is ``point:seq``, so that tests can
    kill the trainer or a sidecar at a named point of a hand-off (no clean-up runs, as in a real kill)."""
    if os.environ.get(FAULT_ENV) == f"{point}:{seq}":
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class Entry:
    """A snapshot in the queue: its tags and where it is now."""

    tags: Tags
    path: str

    @property
    def seq(self) -> int:
        return self.tags.seq


class Queue:
    """The hand-off queue of one run: ``run_dir`` is the training folder or its ``nbest-async``."""

    def __init__(self, run_dir: Any):
        root = os.fspath(run_dir)
        self.root = root if os.path.basename(os.path.normpath(root)) == FOLDER else os.path.join(root, FOLDER)

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def create(self) -> None:
        for folder in ("snapshots", "claims", "results", "decisions", "kept"):
            os.makedirs(self.path(folder), exist_ok=True)

    # -- the manifest -----------------------------------------------------------------------

    def write_manifest(self, manifest: Mapping[str, Any], overwrite: bool = False) -> None:
        self.create()
        path = self.path("manifest.json")
        write_text(path, json_text(check_manifest(dict(manifest), path)), overwrite)

    def read_manifest(self) -> Dict[str, Any]:
        path = self.path("manifest.json")
        return check_manifest(read_json(path, "hand-off manifest"), path)

    def lock_trainer(self) -> int:
        """Hold ``trainer.lock`` for the process's lifetime (its descriptor); two trainers on one queue
        would both allocate sequence numbers."""
        self.create()
        fd = try_lock(self.path("trainer.lock"))
        if fd is None:
            raise InputError("another training process hands off to this queue", self.root)
        return fd

    # -- snapshots --------------------------------------------------------------------------

    def entries(self, folder: str = "snapshots") -> List[Entry]:
        """The snapshots in ``folder`` ("snapshots" or "kept"), in sequence order; other names ignored."""
        try:
            names = os.listdir(self.path(folder))
        except FileNotFoundError:
            return []
        found = [Entry(tags, self.path(folder, name)) for name in names if (tags := Tags.parse(name))]
        return sorted(found, key=lambda entry: entry.seq)

    def find(self, seq: int) -> Optional[Entry]:
        """Snapshot ``seq``, waiting or kept."""
        return next((e for folder in ("snapshots", "kept") for e in self.entries(folder) if e.seq == seq), None)

    def next_seq(self) -> int:
        """1 + the largest sequence number in the queue (the trainer is its only producer)."""
        seqs = [e.seq for f in ("snapshots", "kept") for e in self.entries(f)] + list(self._result_seqs())
        return max([*seqs, *self.superseded()], default=0) + 1

    def put(self, render: Callable[[str], None], tags: Tags) -> Entry:
        """Hand a snapshot off: ``render(partial)`` writes it (a file or a folder) under a private
        name, renamed into place whole. ``tags.seq`` None: the next number."""
        self.create()
        tags = replace(tags, seq=self.next_seq()) if tags.seq is None else tags
        if not 0 < tags.seq < 10 ** 6:
            raise InputError(f"snapshot sequence number {tags.seq} is not from 1 to 999999", self.root)
        path = self.path("snapshots", tags.name)

        def staged(partial: str) -> None:
            render(partial)
            fault("staged", tags.seq)
        write_file(path, staged)
        fault("placed", tags.seq)
        return Entry(tags, path)

    def waiting(self) -> List[Entry]:
        """Snapshots with no result yet (claimed ones too), oldest first."""
        return [e for e in self.entries() if not self.has_result(e.seq)]

    def make_room(self, k: int, skip: bool = False, poll: float = 0.5, timeout: Optional[float] = None,
                  sleep: Callable[[float], None] = time.sleep) -> bool:
        """Before a hand-off: wait until fewer than ``k`` snapshots wait (False if ``timeout`` seconds
        pass first). ``skip``: when ``k`` wait, give every unclaimed one a skipped result and delete it
        (only snapshots being evaluated then count), so the new one is the newest waiting."""
        deadline = None if timeout is None else time.monotonic() + timeout
        said = False
        while True:
            waiting = self.waiting()
            if skip and len(waiting) >= k:
                for entry in waiting:
                    self.skip(entry)
                waiting = self.waiting()
            if len(waiting) < k:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            fault("waiting", self.next_seq())
            if not said:
                logger.info("waiting for the sidecar: %d snapshots not evaluated, oldest %s", len(waiting),
                            waiting[0].tags.name)
                said = True
            sleep(poll)

    def skip(self, entry: Entry) -> bool:
        """Give ``entry`` a skipped result and delete it, unless a sidecar holds its claim or it has a result."""
        claim = self.try_claim(entry, {"skipped_by": os.getpid()})
        if claim is None:
            return False
        with claim:
            self.put_result(entry.seq, {"tags": entry.tags.as_dict(), "skipped": SKIPPED})
            remove(entry.path)
        return True

    # -- claims -----------------------------------------------------------------------------

    def try_claim(self, entry: Entry, body: Mapping[str, Any]) -> Optional[Claim]:
        """The claim of ``entry`` if no one holds it and it still has no result (checked again after
        locking: its last holder may have just finished); None otherwise."""
        os.makedirs(self.path("claims"), exist_ok=True)
        lock = self.path("claims", f"{entry.seq:06d}.lock")
        fd = try_lock(lock)
        if fd is None:
            return None
        if self.has_result(entry.seq) or not os.path.lexists(entry.path):
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({**body, "pid": os.getpid(), "started": time.time()}).encode(), 0)
        return Claim(self, entry, fd, lock)

    def claim_next(self, body: Mapping[str, Any] = {}) -> Optional[Claim]:
        """The oldest waiting snapshot that no one is evaluating, claimed; None if there is none."""
        return next((c for e in self.waiting() if (c := self.try_claim(e, body)) is not None), None)

    # -- results, decisions, the verdict ----------------------------------------------------

    def _result_path(self, seq: int) -> str:
        return self.path("results", f"{seq:06d}.json")

    def has_result(self, seq: int) -> bool:
        return os.path.lexists(self._result_path(seq))

    def put_result(self, seq: int, result: Mapping[str, Any]) -> None:
        """Write snapshot ``seq``'s result, once: a second result of it is refused (InputError)."""
        os.makedirs(self.path("results"), exist_ok=True)
        write_text(self._result_path(seq), json_text({**result, "seq": seq}), overwrite=False)

    def result(self, seq: int) -> Optional[Dict[str, Any]]:
        path = self._result_path(seq)
        return check_result(read_json(path, "hand-off result"), seq, path) if os.path.lexists(path) else None

    def _result_seqs(self) -> Iterator[int]:
        try:
            names = os.listdir(self.path("results"))
        except FileNotFoundError:
            return
        yield from (int(n[:6]) for n in names if re.fullmatch(r"\d{6}\.json", n))

    def superseded(self) -> Set[int]:
        """The seqs a resumed trainer set aside (``results/superseded-g*/``): validations of training
        that the resume undid. They keep their numbers (never handed out again) and are never decided."""
        found: Set[int] = set()
        folders = os.listdir(self.path("results")) if os.path.isdir(self.path("results")) else []
        for name in filter(SUPERSEDED.fullmatch, folders):
            found.update(int(n[:6]) for n in os.listdir(self.path("results", name)) if re.fullmatch(r"\d{6}\.json", n))
        return found

    def results(self) -> Dict[int, Dict[str, Any]]:
        """Every result by sequence number, in order."""
        return {seq: self.result(seq) for seq in sorted(self._result_seqs())}

    def write_decision(self, seq: int, decision: Mapping[str, Any]) -> None:
        os.makedirs(self.path("decisions"), exist_ok=True)
        write_text(self.path("decisions", f"{seq:06d}.json"), json_text(decision), overwrite=True)

    def verdict_lock(self):
        """The lock under which results are decided, in order, once (held for milliseconds)."""
        os.makedirs(self.root, exist_ok=True)
        return locked(self.path("verdict.lock"))

    def read_verdict(self) -> Optional[Dict[str, Any]]:
        path = self.path("verdict.json")
        return check_verdict(read_json(path, "hand-off verdict"), path) if os.path.lexists(path) else None

    def write_verdict(self, verdict: Mapping[str, Any]) -> None:
        path = self.path("verdict.json")
        write_text(path, json_text(check_verdict(dict(verdict), path)), overwrite=True)

    def keep(self, seq: int) -> Optional[Entry]:
        """Move snapshot ``seq`` to ``kept/`` (a rename; nothing if it is there already)."""
        entry = self.find(seq)
        if entry is None or os.path.dirname(entry.path) == self.path("kept"):
            return entry
        os.makedirs(self.path("kept"), exist_ok=True)
        target = self.path("kept", entry.tags.name)
        os.rename(entry.path, target)
        return Entry(entry.tags, target)

    def reconcile(self, verdict: Optional[Mapping[str, Any]] = None) -> None:
        """Redo the clean-up a decision implies (it may have been cut short): a kept snapshot moves to
        ``kept/``; one decided and not kept is deleted. Without a rule (``keep`` null) nothing is deleted."""
        verdict = self.read_verdict() if verdict is None else verdict
        if verdict is None or verdict["keep"] is None:
            return
        keep = set(verdict["keep"])
        for seq in keep:
            self.keep(seq)
        for folder in ("snapshots", "kept"):
            for entry in self.entries(folder):
                if entry.seq <= verdict["decided_through"] and entry.seq not in keep:
                    remove(entry.path)

    def disk_use(self) -> int:
        """Bytes under ``snapshots/`` and ``kept/`` (staging folders included)."""
        total = 0
        for folder in ("snapshots", "kept"):
            for root, _, files in os.walk(self.path(folder)):
                total += sum(os.lstat(os.path.join(root, f)).st_size for f in files)
        return total


class Claim:
    """A held claim (a context manager): released on exit or when the process dies. Its lock file is
    removed once the snapshot has a result; whoever locks a new one finds that result and moves on."""

    def __init__(self, queue: Queue, entry: Entry, fd: int, lock: str):
        self.queue, self.entry, self.fd, self.lock = queue, entry, fd, lock

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def release(self) -> None:
        if self.fd is None:
            return
        if self.queue.has_result(self.entry.seq):
            try:
                os.unlink(self.lock)
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None


def remove(path: str) -> None:
    """Delete a snapshot (a file or a folder); gone already is fine."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
