"""Heartbeats of the processes around a hand-off queue (:mod:`nbest_eval.training.handoff`): the
trainer's ``trainer.json`` and each sidecar's ``sidecars/HOST.PID.json``, small JSON files rewritten
atomically, so that each side can tell whether the other is still there.

Liveness: a process on this host (the same boot) is alive while its pid runs; one elsewhere while
its beat counter keeps moving, measured on the reader's own monotonic clock, so clock skew between
hosts does not matter.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, Optional

from ..data import InputError
from ..files.output import write_text
from .handoff import Queue
from .handoff_files import read_json

HOST = socket.gethostname()
#: a remote process whose beat has not moved for this long is taken for dead
STALE_S = 60.0
STATES = ("training", "running", "done", "failed")


def boot_id() -> str:
    """This boot's id (Linux), so that a pid recorded before a reboot is not taken for a live one."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class Heartbeat:
    """A process's heartbeat file: :meth:`beat` rewrites it with the counter one up; :meth:`start`
    beats every ``interval`` seconds on a daemon thread until :meth:`stop`."""

    def __init__(self, path: str, role: str, state: str = "running", **fields: Any):
        self.path = path
        self.record: Dict[str, Any] = {"role": role, "pid": os.getpid(), "host": HOST, "boot_id": boot_id(),
                                       "beat": 0, "state": state, **fields}
        self._lock, self._stop, self._thread = threading.Lock(), threading.Event(), None

    @classmethod
    def of_trainer(cls, queue: Queue, **fields: Any) -> Heartbeat:
        queue.create()
        return cls(queue.path("trainer.json"), "trainer", "training", **fields)

    @classmethod
    def of_sidecar(cls, queue: Queue, name: Optional[str] = None, **fields: Any) -> Heartbeat:
        os.makedirs(queue.path("sidecars"), exist_ok=True)
        return cls(queue.path("sidecars", f"{name or f'{HOST}.{os.getpid()}'}.json"), "sidecar", **fields)

    def beat(self, **changes: Any) -> None:
        with self._lock:
            self.record.update(changes, beat=self.record["beat"] + 1, time=time.time())
            write_text(self.path, json.dumps(self.record) + "\n", overwrite=True)

    def start(self, interval: float = 5.0) -> Heartbeat:
        self.beat()

        def run() -> None:
            while not self._stop.wait(interval):
                self.beat()
        self._thread = threading.Thread(target=run, name="nbest-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self, state: Optional[str] = None) -> None:
        """Stop beating; ``state`` ("done", "failed") is written last."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if state is not None:
            self.beat(state=state)


def read_heartbeat(path: str) -> Optional[Dict[str, Any]]:
    """A heartbeat file (None if there is none), checked as input."""
    if not os.path.lexists(path):
        return None
    record = read_json(path, "heartbeat")
    kinds = {"pid": int, "host": str, "beat": int, "state": str, "time": (int, float)}
    if not isinstance(record, dict) or any(not isinstance(record.get(k), t) or isinstance(record.get(k), bool)
                                           for k, t in kinds.items()) or record["state"] not in STATES:
        raise InputError("not a heartbeat (pid, host, beat, state, time)", path)
    return record


class Liveness:
    """Whether the process behind successive reads of one heartbeat is alive (see the module docstring)."""

    def __init__(self, stale_s: float = STALE_S, clock: Callable[[], float] = time.monotonic):
        self.stale_s, self.clock = stale_s, clock
        self._last: Optional[tuple] = None  # ((pid, host, beat), when it was first seen)

    def alive(self, record: Dict[str, Any]) -> bool:
        if record["host"] == HOST and record.get("boot_id", "") == boot_id():
            return pid_alive(record["pid"])
        beat, now = (record["pid"], record["host"], record["beat"]), self.clock()
        if self._last is None or self._last[0] != beat:
            self._last = (beat, now)
        return now - self._last[1] < self.stale_s


def trainer_status(queue: Queue, liveness: Liveness) -> str:
    """The trainer as the sidecar sees it: "training", "done", "failed", "dead" (gone without saying
    so), or "absent" (no heartbeat: a queue filled by hand)."""
    record = read_heartbeat(queue.path("trainer.json"))
    if record is None:
        return "absent"
    if record["state"] in ("done", "failed"):
        return record["state"]
    return "training" if liveness.alive(record) else "dead"
