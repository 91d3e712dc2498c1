"""Checkpoint files for ``nbest-eval select``: their training order, the score cache keyed by their
content, the link to the pick. (What is picked is :mod:`nbest_eval.selection`'s.)

Nothing here writes a checkpoint: checkpoints are only listed, hashed (to key the score cache on
their content) and (on request) linked to.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import time
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..data import InputError
from ..files.locks import locked
from ..files.output import write_file, write_text
from ..files.writable import check_link
from ..formats.common import LineSource, open_regular

logger = logging.getLogger(__name__)

#: fairseq's names for copies of other checkpoints (best, last, top-k best)
ALIAS = re.compile(r"checkpoint_(best|last)\.pt|checkpoint\.best_.*\.pt")
_EPOCH_END = re.compile(r"checkpoint(\d+)\.pt")
_MID_EPOCH = re.compile(r"checkpoint_(\d+)_(\d+)\.pt")
_KEY = re.compile(r"[0-9a-f]{64}")
#: the longest line of a select cache (it holds an entry per line; older ones are one line)
CACHE_LINE_BYTES = 1 << 28
#: a file changed this recently (nanoseconds) before it is hashed is not remembered (:func:`_file_digest`)
SETTLED_NS = 2_000_000_000
#: the digests of files hashed in this process, by their status (:func:`_file_digest`)
_DIGESTS: Dict[Tuple[int, ...], str] = {}


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


class ScoreCache:
    """Per-checkpoint scores in a JSON file, keyed by the checkpoint's path and content (a hash: a
    file edited to the same size and time is new) and by the scoring options, so a re-run scores only
    new or changed checkpoints. entries of ``select`` are :class:`~nbest_eval.selection.cache_entry.CacheEntry` objects:
    the metric values, the per-prompt statistics (a re-run resamples them without re-scoring) and the
    longest list.

    A key names no entry, so each entry is stored bound to what it scored: ``{"content": the
    checkpoint's digest, "settings": the options' digest, "entry": ...}``; one used for another
    checkpoint (two entries swapped, one copied over another) or other settings does not match them.
    ``verify`` then turns the entry as read into the entry (``as_json`` turns it back), or raises
    ValueError saying why it is not one (a damaged or hand-edited file). Either failure is a miss,
    scored again with a warning naming the checkpoint. ``scored`` holds each checkpoint's digest as
    it was scored, for what is done with it later (:func:`link_best`).

    Runs that share the file lose no entries: each write re-reads it under a lock (``FILE.lock``),
    adds its entry and replaces the file atomically.
    """

    def __init__(self, path: Optional[str], options: Mapping, verify: Callable[[Any], Any] = lambda raw: raw,
                 as_json: Callable[[Any], Any] = lambda entry: entry):
        self.path = path
        self.options = json.dumps(options, sort_keys=True, default=str)
        self.settings = hashlib.sha256(self.options.encode()).hexdigest()
        self.verify, self.as_json = verify, as_json
        self.entries: Dict[str, Any] = self._read() if path else {}
        self.scored: Dict[str, str] = {}

    def key(self, checkpoint: str, digest: Optional[str] = None) -> str:
        """The entry's key: the checkpoint's path, content (``digest``, computed if not given), options."""
        fingerprint = json.dumps([os.path.abspath(checkpoint), digest or content_digest(checkpoint), self.options])
        return hashlib.sha256(fingerprint.encode()).hexdigest()

    def get_or_score(self, checkpoint: str, score: Callable[[], Any]) -> Any:
        """The checkpoint's verified entry, or ``score()``'s (then saved). InputError if the checkpoint
        changed while it was scored: its entry would be bound to content it did not score."""
        digest = self.scored[checkpoint] = content_digest(checkpoint)
        key = self.key(checkpoint, digest)
        raw = self.entries.get(key)
        if raw is not None:
            try:
                return self.verify(self._bound(raw, digest))
            except ValueError as err:
                logger.warning("%s: the cached entry for %s is not its scores (%s); scoring it again",
                               self.path, checkpoint, err)
        entry = score()
        if content_digest(checkpoint) != digest:
            raise InputError("changed while it was scored (is training still writing it?); run select again",
                             checkpoint)
        stored = self.as_json(entry)
        self._save(key, {"content": digest, "settings": self.settings, "entry": stored,
                         "seal": _seal(digest, self.settings, stored)})
        return entry

    def _bound(self, raw: Any, digest: str) -> Any:
        """The entry that ``raw`` binds to the content ``digest`` and these settings; ValueError if to others."""
        if not isinstance(raw, dict) or sorted(raw) != ["content", "entry", "seal", "settings"]:
            raise ValueError("it names no content that it scored (an entry of an earlier version)")
        if raw["content"] != digest:
            raise ValueError(f"it scored other content (sha256 {raw['content']!s:.12}...) than the file's now "
                             f"({digest:.12}...)")
        if raw["settings"] != self.settings:
            raise ValueError("it was scored with other settings")
        if raw["seal"] != _seal(digest, self.settings, raw["entry"]):
            raise ValueError("its scores are not the ones stored with that content (an entry moved or edited)")
        return raw["entry"]

    def _read(self) -> Dict[str, Any]:
        return read_cache(self.path) if os.path.lexists(self.path) else {}

    def _save(self, key: str, values: Dict) -> None:
        """Add the entry to the file as it is now (other runs may have added theirs), under the lock."""
        self.entries[key] = values
        if not self.path:
            return
        try:
            with locked(self.path + ".lock"):
                self.entries = {**self._read(), key: values}
                write_text(self.path, cache_text(self.entries), overwrite=True)
        except OSError as err:  # the lock file
            raise InputError(f"cannot write the select cache: {err.strerror}; pass --cache FILE or --no-cache",
                             self.path) from None


def read_cache(path: str) -> Dict[str, Any]:
    """A select cache's entries (key -> entry, entries unchecked), read as every input is: a regular
    file in bounded lines (an entry per line, at most :data:`CACHE_LINE_BYTES`), JSON (an integer of
    more than 40 digits reads as infinite) with nesting within Python's limit, an object of
    :meth:`ScoreCache.key`'s keys. Anything else is an error naming the file: it is not adopted, nor
    replaced."""
    try:
        with open_regular(path, "a select cache is a file") as file:
            text = "\n".join(line for _, line in LineSource(file, path, CACHE_LINE_BYTES))
        entries = json.loads(text, parse_int=_bounded_int)
    except (ValueError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise InputError(f"not a readable select cache ({why}); delete it or pass another --cache", path) from None
    if not isinstance(entries, dict) or not all(isinstance(k, str) and _KEY.fullmatch(k) for k in entries):
        raise InputError("not a select cache (an object of checkpoint keys); pass another --cache", path)
    return entries


def cache_text(entries: Mapping[str, Any]) -> str:
    """A select cache's text: a JSON object, an entry per line (so each line stays bounded)."""
    lines = [f"{json.dumps(key)}: {json.dumps(entry)}" for key, entry in entries.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def is_select_cache(path: str) -> bool:
    """Whether ``path`` reads as a select cache (:func:`read_cache`)."""
    try:
        read_cache(path)
    except InputError:
        return False
    return True


def _bounded_int(text: str) -> float:
    """An integer of the cache; one of over 40 digits is infinite (its entry fails, not the file)."""
    if len(text.lstrip("-")) > 40:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


def _seal(content: str, settings: str, entry: Any) -> str:
    """What ties an entry's scores to the content and settings stored beside them: an entry moved
    from another checkpoint's record, or edited, breaks it. Not a signature: whoever edits the file on
    purpose can recompute it (docs/significance.md says what the cache can and cannot catch)."""
    try:
        text = json.dumps([content, settings, entry], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return ""
    return hashlib.sha256(text.encode()).hexdigest()


def content_digest(path: str) -> str:
    """sha256 of a file's bytes, or of a directory's files (their names and contents, recursively).
    A file is hashed once per process while its status says it is unchanged (:func:`_file_digest`)."""
    try:
        if os.path.isdir(path):
            digest = hashlib.sha256()
            for name in sorted(os.path.relpath(os.path.join(root, f), path)
                               for root, _, files in os.walk(path) for f in files):
                digest.update(f"{name}\0{content_digest(os.path.join(path, name))}\0".encode())
            return digest.hexdigest()
        return _file_digest(path)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", err.filename or path) from None


def _file_digest(path: str) -> str:
    """A file's sha256, remembered by its status (device, inode, size, modification and change
    times): select hashes each checkpoint to find its entry, and again to check it was not changed
    while scored and before it is linked; a multi-GB checkpoint should be read once. Any write, and
    any change of the times, sets the change time, which no user can set; a file whose change time is
    within :data:`SETTLED_NS` of the hashing is hashed each time, as a change within one tick of its
    filesystem's clock could leave its status as it was."""
    with open_regular(path, "its content keys the score cache; write it to a file first") as file:
        status = _status(file)
        if status in _DIGESTS:
            return _DIGESTS[status]
        started = time.time_ns()
        digest = hashlib.sha256()
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
        if _status(file) == status and status[-1] < started - SETTLED_NS:
            _DIGESTS[status] = digest.hexdigest()
    return digest.hexdigest()


def _status(file: BinaryIO) -> Tuple[int, ...]:
    found = os.fstat(file.fileno())
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def link_best(target: str, link: str, force: bool = False, scored: Optional[str] = None) -> str:
    """Make ``link`` a link to ``target``'s file itself (never to a link, never to itself); a copy
    where links are not possible. Returns ``"link"`` or ``"copy"``. With ``scored`` (the content
    digest the pick was scored with), only if ``target`` still exists with that content, checked as
    the link is made (inside an :func:`~nbest_eval.files.output.all_or_nothing` block, a refusal writes
    none of its outputs): training may have deleted or replaced it since.

    Only an existing link is ever replaced (atomically), and only with ``force``: a real file or
    directory at ``link`` is the user's and is left alone.
    """
    check_link(None, link, force)
    made = []

    def place(partial: str) -> None:
        if scored is not None:
            check_unchanged(target, scored)
        real = os.path.realpath(target)  # a link's own file: never a link, and (check_link) never ``link`` itself
        try:
            os.symlink(real, partial, target_is_directory=os.path.isdir(real))
            made.append("link")
        except OSError:
            (shutil.copytree if os.path.isdir(real) else shutil.copy2)(real, partial)
            made.append("copy")

    write_file(link, place, overwrite=force)
    return made[0]


def check_unchanged(checkpoint: str, scored: str) -> None:
    """InputError unless ``checkpoint`` exists with the content digest ``scored``."""
    if not os.path.exists(checkpoint):
        raise InputError("the pick no longer exists: it was deleted after it was scored (as save_total_limit "
                         "and --keep-last-epochs do while training runs); nothing written", checkpoint)
    now = content_digest(checkpoint)
    if now != scored:
        raise InputError(f"the pick is not the content that was scored (sha256 {scored:.12}...; now {now:.12}...): "
                         f"it was replaced or changed since; run select again; nothing written", checkpoint)
