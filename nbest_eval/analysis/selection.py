"""Checkpoint selection: order checkpoints, replay early stopping, cache scores, link the winner.

Nothing here reads or writes a checkpoint's content: checkpoints are only listed, fingerprinted by
their path, size and modification time, and (on request) linked to.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from ..data import InputError

#: fairseq's names for copies of other checkpoints (best, last, top-k best)
ALIAS = re.compile(r"checkpoint_(best|last)\.pt|checkpoint\.best_.*\.pt")
_EPOCH_END = re.compile(r"checkpoint(\d+)\.pt")
_MID_EPOCH = re.compile(r"checkpoint_(\d+)_(\d+)\.pt")


def checkpoint_order(paths: Sequence[str]) -> List[str]:
    """Training order. fairseq names: checkpoint{E}.pt (end of epoch E) after every
    checkpoint_{E}_{U}.pt of that epoch (mid-epoch, update U); otherwise by the numbers in the
    name: checkpoint-500 < checkpoint-1000 (Hugging Face), run2.tsv < run10.tsv."""
    def key(path):
        name = os.path.basename(os.path.normpath(path))
        epoch_end, mid_epoch = _EPOCH_END.fullmatch(name), _MID_EPOCH.fullmatch(name)
        if epoch_end or mid_epoch:
            epoch, update = (int(epoch_end.group(1)), math.inf) if epoch_end else map(int, mid_epoch.groups())
            return (0, epoch, update, [])
        return (1, 0, 0, [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)])
    return sorted(dict.fromkeys(paths), key=key)


def drop_aliases(paths: Sequence[str]) -> List[str]:
    """Leave out checkpoint_best.pt, checkpoint_last.pt and checkpoint.best_*.pt: they are copies of
    numbered checkpoints, and scoring them twice would distort the patience replay."""
    return [p for p in paths if not ALIAS.fullmatch(os.path.basename(p))]


def best_index(values: Sequence[Optional[float]], maximize: bool = True) -> Optional[int]:
    """Index of the best value. The latest wins a tie, as with fairseq's ``checkpoint_best.pt``,
    which is rewritten whenever a validation is at least as good as the best so far."""
    best = None
    for i, value in enumerate(values):
        if value is not None and (best is None or value == values[best] or _better(value, values[best], maximize)):
            best = i
    return best


@dataclass
class PatienceReplay:
    """What fairseq's ``--patience P`` would have done, validating once per checkpoint in order."""

    chosen: Optional[int]  # the best checkpoint when training stopped (or at the end)
    stopped_at: Optional[int]  # the checkpoint whose validation triggered the stop; None: never


def replay_patience(values: Sequence[Optional[float]], patience: int, maximize: bool = True) -> PatienceReplay:
    """fairseq's ``should_stop_early``: an improvement must be strict; after ``patience``
    validations in a row without one, training stops. The choice is what ``checkpoint_best.pt``
    holds at that point."""
    best, runs = None, 0
    for i, value in enumerate(values):
        if value is None:
            continue
        if best is None or _better(value, best, maximize):
            best, runs = value, 0
        else:
            runs += 1
            if runs >= patience:
                return PatienceReplay(best_index(values[: i + 1], maximize), i)
    return PatienceReplay(best_index(values, maximize), None)


def _better(a: float, b: float, maximize: bool) -> bool:
    return a > b if maximize else a < b


class ScoreCache:
    """Per-checkpoint metric values in a JSON file, keyed by the checkpoint's fingerprint and the
    scoring options, so a re-run scores only new (or changed) checkpoints."""

    def __init__(self, path: Optional[str], options: Mapping):
        self.path = path
        self.options = json.dumps(options, sort_keys=True, default=str)
        self.entries: Dict[str, Dict] = {}
        if path and os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as file:
                    self.entries = json.load(file)
            except (OSError, ValueError) as err:
                raise InputError(f"unreadable select cache ({err}); delete it or pass another --cache", path) from None
            if not isinstance(self.entries, dict):
                raise InputError("not a select cache (expected a JSON object); pass another --cache", path)

    def key(self, checkpoint: str) -> str:
        stat = os.stat(checkpoint)
        # a directory (Hugging Face checkpoint) changes when a file directly in it is replaced
        mtimes = [(f, os.stat(os.path.join(checkpoint, f)).st_mtime_ns) for f in sorted(os.listdir(checkpoint))] \
            if os.path.isdir(checkpoint) else stat.st_size
        fingerprint = json.dumps([os.path.abspath(checkpoint), mtimes, stat.st_mtime_ns, self.options])
        return hashlib.sha256(fingerprint.encode()).hexdigest()

    def get_or_score(self, checkpoint: str, score: Callable[[], Dict]) -> Dict:
        key = self.key(checkpoint)
        if key not in self.entries:
            self.entries[key] = score()
            self._save()
        return self.entries[key]

    def _save(self) -> None:
        """Replace the cache file atomically, through a new temporary file beside it."""
        if not self.path:
            return
        try:
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=os.path.dirname(os.path.abspath(self.path)),
                                             prefix=".select-cache-", delete=False) as file:
                json.dump(self.entries, file)
            os.replace(file.name, self.path)
        except OSError as err:
            raise InputError(f"cannot write the select cache: {err.strerror}; pass --cache FILE or --no-cache",
                             self.path) from None


def check_link(link: str, force: bool) -> None:
    """What :func:`link_best` would refuse, checked before any work is done."""
    if os.path.lexists(link):
        if not os.path.islink(link):
            raise InputError("exists and is not a link; refusing to replace it", link)
        if not force:
            raise InputError("already exists; pass --force to replace the link", link)


def link_best(target: str, link: str, force: bool = False) -> str:
    """Make ``link`` point at ``target`` (a symlink; a copy where links are not possible).

    Only an existing symlink is ever replaced, and only with ``force``: a real file or directory
    at ``link`` is the user's and is left alone.
    """
    check_link(link, force)
    if os.path.lexists(link):
        os.remove(link)
    try:
        os.symlink(os.path.abspath(target), link, target_is_directory=os.path.isdir(target))
        return "link"
    except OSError:
        if os.path.isdir(target):
            shutil.copytree(target, link)
        else:
            shutil.copy2(target, link)
        return "copy"
