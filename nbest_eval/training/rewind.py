"""Resuming a run whose hand-off queue ran ahead of its checkpoint (issue 33).

A framework validates, hands the snapshot off and only then saves its checkpoint; a trainer killed
in between resumes from an earlier step and trains (and validates) those steps again, while the
sidecar may already have evaluated and decided the validations it lost. :func:`rewind` undoes them:
results, decisions and snapshots of steps after the resumed one are set aside under
``superseded-g{gen}/`` (kept for the record, out of ``results.jsonl``, never decided; their saved
n-best lists too), and the
verdict goes back to the one after the last decision the resumed run still has. New hand-offs get
the next generation and new sequence numbers.

The rolled-back verdict's kept snapshot must still be there: the sidecar holds every kept snapshot a
resume could roll back to (:func:`held`), using the step the trainer's last checkpoint covers, which
the trainer records in its heartbeat (``saved_through``). Where it is gone anyway (a resume from an
older checkpoint than the last one), :func:`rewind` says so.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, List, Mapping, Optional

from ..data import InputError
from ..files.locks import try_lock
from ..files.output import write_text
from .handoff import Queue, remove
from .handoff_files import json_text, read_json
from .heartbeat import read_heartbeat

logger = logging.getLogger(__name__)

REWIND_FILE = "rewind.json"


def step_of(tags: Mapping[str, Any]) -> int:
    """A result's training step (fairseq's update, HF's global step)."""
    return tags.get("update", tags.get("step"))


def held(queue: Queue, verdict: Mapping[str, Any]) -> List[int]:
    """The snapshots to keep after ``verdict``: the kept one, and the kept one of every verdict a resume
    could roll back to, that is, after each decision of a step beyond what the trainer's last checkpoint
    covers (``saved_through`` in ``trainer.json``) and after the last decision before it. No trainer
    heartbeat, or one without ``saved_through``: no resume is rolled back, the kept one only."""
    keep = [] if verdict.get("kept") is None else [verdict["kept"]["seq"]]
    record = read_heartbeat(queue.path("trainer.json"))
    saved = None if record is None else record.get("saved_through")
    if not keep or not isinstance(saved, int):
        return keep
    for seq in reversed(verdict["decided"]):
        decision = read_decision(queue, seq)
        kept = (decision.get("verdict_after") or {}).get("kept") or {}
        if isinstance(kept.get("seq"), int) and kept["seq"] not in keep:
            keep.append(kept["seq"])
        if decision.get("step", saved) <= saved:
            break
    return sorted(keep)


def read_decision(queue: Queue, seq: int, folder: str = "decisions") -> Dict[str, Any]:
    path = queue.path(folder, f"{seq:06d}.json")
    decision = read_json(path, "hand-off decision")
    if not isinstance(decision, dict):
        raise InputError("not a hand-off decision", path)
    return decision


def rewind(queue: Queue, resumed_at: int, fresh: Mapping[str, Any], timeout: float = 3600.0) -> Dict[str, Any]:
    """Undo what the queue holds beyond step ``resumed_at`` (the step training resumes from), under
    the verdict lock: set results, decisions and snapshots of later steps aside, roll the verdict back
    (``fresh``: the verdict before any decision). A sidecar evaluating such a snapshot is waited for
    (at most ``timeout`` seconds). Returns what ``rewind.json`` records: gen, resumed_at, superseded,
    and ``kept_gone`` (the rolled-back verdict keeps a snapshot that is no longer there) or None."""
    with queue.verdict_lock():
        previous = _read_rewinds(queue)
        gen = previous["gen"] + 1
        aside = f"superseded-g{gen}"
        superseded = _set_aside_snapshots(queue, resumed_at, aside, timeout)
        superseded += _set_aside_results(queue, resumed_at, aside)
        verdict = _rolled_back(queue, set(superseded), fresh)
        kept = (verdict or {}).get("kept")
        gone = None
        if kept is not None:
            entry = queue.find(kept["seq"])
            kept["path"] = None if entry is None else os.path.relpath(entry.path, queue.root)
            gone = kept["seq"] if entry is None else None
        if verdict is not None:
            queue.write_verdict(verdict)
            queue.reconcile(verdict)
        record = {"gen": gen, "resumed_at": resumed_at, "superseded": sorted(superseded), "kept_gone": gone,
                  "time": time.time()}
        write_text(queue.path(REWIND_FILE), json_text({"gen": gen, "rewinds": [*previous["rewinds"], record]}),
                   overwrite=True)
    return record


def _read_rewinds(queue: Queue) -> Dict[str, Any]:
    path = queue.path(REWIND_FILE)
    if not os.path.lexists(path):
        return {"gen": 0, "rewinds": []}
    found = read_json(path, "rewind record")
    if not isinstance(found, dict) or not isinstance(found.get("gen"), int) or \
            not isinstance(found.get("rewinds"), list):
        raise InputError("not a rewind record (gen, rewinds)", path)
    return found


def _set_aside_snapshots(queue: Queue, resumed_at: int, aside: str, timeout: float) -> List[int]:
    """Delete the snapshots of steps after ``resumed_at``, once no sidecar evaluates them; those with no
    result get one saying why (in the superseded folder). The seqs that had no result."""
    deadline = time.monotonic() + timeout
    unevaluated = []
    for folder in ("snapshots", "kept"):
        for entry in queue.entries(folder):
            if entry.tags.step <= resumed_at:
                continue
            lock = queue.path("claims", f"{entry.seq:06d}.lock")
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = try_lock(lock)
            while fd is None:  # a sidecar evaluates it: its result comes first, then it is set aside
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a sidecar has evaluated snapshot {entry.tags.name} for over {timeout} s; "
                                       f"cannot resume until it is done ({queue.root})")
                time.sleep(0.5)
                fd = try_lock(lock)
            try:
                if not queue.has_result(entry.seq):
                    os.makedirs(queue.path("results", aside), exist_ok=True)
                    write_text(queue.path("results", aside, f"{entry.seq:06d}.json"),
                               json_text({"seq": entry.seq, "tags": entry.tags.as_dict(),
                                          "not_evaluated": f"superseded: training resumed from step {resumed_at}"}))
                    unevaluated.append(entry.seq)
                remove(entry.path)
                remove(lock)  # whoever still tries it finds the snapshot gone
            finally:
                os.close(fd)
    return unevaluated


def _set_aside_results(queue: Queue, resumed_at: int, aside: str) -> List[int]:
    """Move the results (and decisions) of steps after ``resumed_at`` into the superseded folders."""
    moved = []
    for seq, result in queue.results().items():
        if step_of(result["tags"]) <= resumed_at:
            continue
        for folder in ("results", "decisions"):
            _move_aside(queue.path(folder, f"{seq:06d}.json"), aside)
        lists = result.get("lists")
        if isinstance(lists, str) and os.path.isabs(lists):  # so that the retrained validation's take its names
            _move_aside(lists, aside)
            _move_aside(os.path.splitext(lists)[0] + ".json", aside)
        moved.append(seq)
    return moved


def _move_aside(path: str, aside: str) -> None:
    """Move ``path`` (if it is there) into the folder ``aside`` beside it."""
    if os.path.lexists(path):
        os.makedirs(os.path.join(os.path.dirname(path), aside), exist_ok=True)
        os.replace(path, os.path.join(os.path.dirname(path), aside, os.path.basename(path)))


def _rolled_back(queue: Queue, superseded: set, fresh: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The verdict after the last decision that is not superseded (``fresh`` if none); None when
    nothing was decided (no verdict yet)."""
    verdict = queue.read_verdict()
    if verdict is None:
        return None
    kept_seqs = [s for s in range(1, verdict["decided_through"] + 1) if s not in superseded
                 and os.path.lexists(queue.path("decisions", f"{s:06d}.json"))]
    if not kept_seqs:
        return dict(fresh)
    after = read_decision(queue, kept_seqs[-1]).get("verdict_after")
    if not isinstance(after, dict):
        raise InputError("cannot roll the verdict back: this decision records no verdict_after",
                         queue.path("decisions", f"{kept_seqs[-1]:06d}.json"))
    return after

