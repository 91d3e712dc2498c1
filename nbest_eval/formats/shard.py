"""Reading one worker's part of a grouped n-best file (``score --jobs N``), parsing no other part.

Where a format tells a line's prompt cheaply (:data:`KEY_OF_LINE`: tsv's first field, moses's
sentence number, jsonl's one prompt a line) the file is cut into N byte ranges at prompt boundaries:
cut k is the first line after byte k * size / N where the prompt changes, so a prompt never straddles
two workers. Each worker finds its own two cuts (the workers beside a cut find the same one) and
counts the newlines before its range, for its line numbers, at memory speed: the parent process
does not read the file, and a worker parses its range only. A prompt that comes back within a range
is found by the format's reader; one split across ranges (an ungrouped file) is found when the parts
are merged (:mod:`nbest_eval.processes.workers`). In the other formats every worker reads the whole
file and keeps the prompts at its gold positions (k, k + N, ...): :class:`~nbest_eval.formats.FileParts`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import BinaryIO, Callable, Dict, Iterator, NamedTuple, Optional

from ..data import InputError
from .common import LineSource
from .moses import SEPARATOR
from .tsv import HEADER

#: bytes read at a time when counting the newlines before a range
COUNT_BYTES = 1 << 20

#: the formats whose lines tell their prompt cheaply: format -> line text -> a key that changes with
#: the prompt, or None for a line of no prompt (blank, a header), which goes with the lines before it
KEY_OF_LINE: Dict[str, Callable[[str], Optional[str]]] = {
    "tsv": lambda text: None if text == HEADER or not text.strip() else text.split("\t", 1)[0],
    "moses": lambda text: text.split(SEPARATOR, 1)[0].strip(" ") if text.strip() else None,
    "jsonl": lambda text: text if text.strip() else None,
}


class ByteRange(NamedTuple):
    """One worker's part of a file: bytes ``start`` to ``end`` (excluded), from line ``first_line``."""

    start: int
    end: int
    first_line: int


def byte_range(file: BinaryIO, format: str, part: int, parts: int, max_line_bytes: int) -> ByteRange:
    """Part ``part`` of ``parts`` of ``file`` (a regular file, opened in binary), cut at prompt boundaries."""
    size = os.fstat(file.fileno()).st_size
    start, end = (_cut(file, KEY_OF_LINE[format], size * k // parts, max_line_bytes) for k in (part, part + 1))
    return ByteRange(start, end, 1 + _newlines(file, start))


def _cut(file: BinaryIO, key: Callable[[str], Optional[str]], offset: int, max_line_bytes: int) -> int:
    """Where the first line after byte ``offset`` whose prompt differs from the line before's starts
    (the file's end if none): a function of the file and ``offset`` only, so that both workers that
    share a cut find it. An over-long line ends the search at its start: its reader reports it."""
    if offset == 0:
        return 0
    limit = max_line_bytes + 2  # the text and its \r\n, as LineSource reads
    file.seek(offset - 1)  # from the end of the line holding byte offset - 1
    while not _whole_line(file.readline(limit), limit):
        pass
    current = None
    while True:
        at = file.tell()
        raw = file.readline(limit)
        if not raw or not _whole_line(raw, limit):
            return at
        found = key(raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8", "replace"))
        if found is not None and current is not None and found != current:
            return at
        current = found if found is not None else current


def _whole_line(raw: bytes, limit: int) -> bool:
    """Whether ``readline(limit)`` gave a whole line (the file's last may have no line end)."""
    return raw.endswith(b"\n") or len(raw) < limit


def _newlines(file: BinaryIO, end: int) -> int:
    file.seek(0)
    count = 0
    while file.tell() < end:
        count += file.read(min(COUNT_BYTES, end - file.tell())).count(b"\n")
    return count


class _Bounded:
    """A file read no further than a given number of bytes (one part of it), as LineSource reads."""

    def __init__(self, file: BinaryIO, size: int):
        self.file, self.left = file, size

    def readline(self, size: int) -> bytes:
        line = self.file.readline(min(size, self.left)) if self.left > 0 else b""
        self.left -= len(line)
        return line


@contextmanager
def open_part(path: str, format: str, part: int, parts: int, max_line_bytes: int) -> Iterator[LineSource]:
    """Part ``part`` of ``parts`` of the file at ``path`` as a :class:`LineSource` (numbered as in the file)."""
    try:
        file = open(path, "rb")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", path) from None
    with file:
        start, end, first_line = byte_range(file, format, part, parts, max_line_bytes)
        file.seek(start)
        yield LineSource(_Bounded(file, end - start), path, max_line_bytes, first_line=first_line,  # type: ignore
                         whole=False)
