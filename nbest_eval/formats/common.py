"""What every format shares: inputs read once in bounded lines, strict number parsing, id checks."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from collections import deque
from contextlib import contextmanager
from typing import (
    Any,
    BinaryIO,
    Deque,
    Dict,
    Hashable,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..data import Gold, Hyp, InputError
from ..files.output import PathLike

#: the n-best formats that :func:`nbest_eval.formats.read_nbest` understands (all but ``lines`` are detected)
FORMATS = ("staple", "fairseq", "tsv", "jsonl", "moses", "lines")

#: default longest line, in bytes without the line end (``--max-line-bytes``), and the highest limit
#: accepted (a longer line would not fit in memory anyway)
MAX_LINE_BYTES, LINE_BYTES_LIMIT = 1 << 20, 1 << 34
#: how much text :meth:`LineSource.peek` holds at most (beyond its first line)
PEEK_BYTES = 1 << 20
#: the name of standard input (``-``) in messages
STDIN = "<stdin>"

Line = Tuple[int, str]  # (1-based line number, text)
Group = Tuple[str, List[Hyp]]  # one prompt's n-best list, as a streaming reader yields it


class Ungrouped(Exception):
    """A streaming reader cannot tell that a prompt's list is complete when its lines end (it comes
    back after other prompts, or its ranks have gaps that later lines may fill): the file is not
    grouped by prompt, so it must be read whole before scoring."""

    def __init__(self, prompt_id: str, path: str, line: int, why: str = "comes back after other prompts"):
        super().__init__(f"{path}:{line}: prompt {prompt_id!r} {why}")
        self.prompt_id, self.path, self.line, self.why = prompt_id, path, line, why

    def __reduce__(self):  # raised in a worker process, re-raised in the reader
        return Ungrouped, (self.prompt_id, self.path, self.line, self.why)


class LineSource:
    """The numbered UTF-8 lines of one input, read once: format detection peeks at the first lines,
    then a reader iterates from line 1 on the same stream (stdin, pipes and FIFOs cannot be reopened).

    Lines are split on ``\\n`` only (not on a lone ``\\r`` or U+2028, which may occur inside a
    translation), so the numbers match what an editor shows; the ``\\n``, a trailing ``\\r`` and a
    BOM are removed. Lines are read in chunks of at most ``max_line_bytes`` + 2 bytes (the limit is on
    the text, not its ``\\r\\n``), so an endless line is an error, not a memory blow-up; NUL bytes,
    which no text holds, are an error too.

    One worker's part of a file (``score --jobs``, :mod:`nbest_eval.formats.shard`) starts at line
    ``first_line`` and is not ``whole``: checks of a file's first lines are not the part's to make.
    """

    def __init__(self, file: BinaryIO, name: str, max_line_bytes: int = MAX_LINE_BYTES, *, first_line: int = 1,
                 whole: bool = True):
        self.file, self.name, self.max_line_bytes, self.whole = file, name, max_line_bytes, whole
        self._ahead: Deque[Line] = deque()
        self._number = first_line - 1

    def peek(self, count: int) -> List[Line]:
        """Up to ``count`` lines ahead, left to be read; fewer at the end of the input or once they
        hold :data:`PEEK_BYTES` characters, so that peeking stays bounded too."""
        size = sum(len(text) for _, text in self._ahead)
        while len(self._ahead) < count and size < PEEK_BYTES:
            line = self._read()
            if line is None:
                break
            self._ahead.append(line)
            size += len(line[1])
        return list(self._ahead)[:count]

    def __iter__(self) -> Iterator[Line]:
        while True:
            line = self._ahead.popleft() if self._ahead else self._read()
            if line is None:
                return
            yield line

    def _read(self) -> Optional[Line]:
        try:  # + 2: the limit is on the text, without its line end (\n or \r\n)
            raw = self.file.readline(self.max_line_bytes + 2)
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror}", self.name, self._number + 1) from None
        if not raw:
            return None
        self._number += 1
        chunk = raw
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if len(raw) > self.max_line_bytes:
            raise InputError(_too_long(chunk, self.max_line_bytes), self.name, self._number)
        nul = raw.find(b"\0")
        if nul >= 0:  # no text format holds one: a binary file, or UTF-16
            raise InputError(f"NUL byte at column {nul + 1}: not a text file (or UTF-16 text; UTF-8 is expected)",
                             self.name, self._number)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"not UTF-8 text (bad byte at column {err.start + 1})", self.name, self._number) from None
        return self._number, text.removeprefix("\ufeff") if self._number == 1 else text


def _too_long(chunk: bytes, limit: int) -> str:
    hint = " (it holds carriage returns: a file with CR-only line ends? convert them to \\n)" if b"\r" in chunk else ""
    return f"line longer than {limit} bytes{hint}; raise the limit with --max-line-bytes if it is real"


Source = Union[PathLike, LineSource]


@contextmanager
def open_input(source: Source, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[LineSource]:
    """``source`` as a :class:`LineSource`: a path (``-`` is standard input), opened once and closed
    on exit, or a LineSource already open (used as it is, with its own line limit)."""
    if isinstance(source, LineSource):
        yield source
        return
    name = os.fspath(source)
    if name == "-":
        if sys.stdin is None:
            raise InputError("there is no standard input to read", STDIN)
        yield LineSource(sys.stdin.buffer, STDIN, max_line_bytes)
        return
    try:
        file = open(name, "rb")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", name) from None
    with file:
        yield LineSource(file, name, max_line_bytes)


def _identity(path: PathLike) -> Tuple[Optional[Tuple], bool]:
    """(identity, read only once?) of an input: standard input (``-``), a pipe, a FIFO or a device
    can be read only once, a regular file again; (None, False) for a file that is not there."""
    name = os.fspath(path)
    try:
        info = os.fstat(0) if name == "-" else os.stat(name)
    except OSError:
        return (("-",), True) if name == "-" else (None, False)
    return (info.st_dev, info.st_ino), name == "-" or not stat.S_ISREG(info.st_mode)


def check_inputs(inputs: Mapping[str, Union[None, PathLike, Sequence[PathLike]]]) -> None:
    """The one rule for a command's inputs (``{option: path or paths}``), by identity, not by name
    (``-``, ``/dev/stdin`` and links are one input): a stream is read by one option only (the first
    would consume it), and a file has one role (the gold given as an n-best file scores zeros)."""
    seen: Dict[Tuple, Tuple[str, bool]] = {}
    for option, paths in inputs.items():
        for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths or []:
            key, once = _identity(path)
            if key is None:
                continue
            name = "standard input" if os.fspath(path) == "-" else os.fspath(path)
            if key not in seen:
                seen[key] = option, once
                continue
            first, first_once = seen[key]
            if once or first_once:
                raise InputError(f"{first} and {option} both read {name}, which can be read only once; "
                                 f"give one of them as a file")
            if first != option:
                raise InputError(f"{first} and {option} name the same file, {name}; give each its own")


def is_stream(path: PathLike) -> bool:
    """Whether ``path`` can be read only once (standard input, a pipe, a FIFO)."""
    return _identity(path)[1]


def open_regular(path: PathLike, why: str) -> BinaryIO:
    """A regular file opened for reading whole (to hash it): a FIFO, which would block, or a device,
    which may never end, is an error naming it and saying ``why`` it must be a file."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO would wait for a writer
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", name) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"not a regular file (a pipe, a FIFO or a device): {why}", name)
    return os.fdopen(fd, "rb")


def no_carriage_return(text: str, path: str, line: int) -> None:
    """For formats that cannot hold a CR inside a line: one there means CR-only line ends, which
    would otherwise read as one long line."""
    if "\r" in text:
        raise InputError("carriage return (CR) inside a line: a file with CR-only line ends? convert them to \\n "
                         "(for example with tr '\\r' '\\n')", path, line)


# ASCII only: Python's float() and int() also take '_', '+', surrounding spaces and non-ASCII digits
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_DIGITS = re.compile(r"[0-9]+")
DECIMAL_HELP = "ASCII digits with an optional '-', fraction and exponent, like 0.25, -1.5 or 2e-05"


def parse_decimal(text: str) -> Optional[float]:
    """A decimal number (:data:`DECIMAL_HELP`), None for anything else; too large ones read as +-inf."""
    return float(text) if _DECIMAL.fullmatch(text) else None


def parse_digits(text: str) -> Optional[int]:
    """A number of ASCII digits only, None for anything else (including more digits than Python converts)."""
    if not _DIGITS.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_score(text: str, path: str, line: int) -> float:
    """A natural-log model score: a decimal or ``-inf`` (probability 0); nan and +inf are no log-probability."""
    value = -math.inf if text == "-inf" else parse_decimal(text)
    if value is None:
        raise InputError(f"score {clip(text)} is not a number: expected {DECIMAL_HELP}, or -inf", path, line)
    if value == math.inf:
        raise InputError(f"score {clip(text)} is too large: +inf is not a log-probability", path, line)
    return value


def clip(text: str, width: int = 60) -> str:
    """``repr(text)``, shortened for messages: a field may be a megabyte long."""
    return repr(text) if len(text) <= width else repr(text[:width]) + "..."


def gold_position(gold: Gold, text: str, what: str, path: str, line: int, past_end: str = "") -> int:
    """The gold prompt that a 0-based sentence number names (fairseq's sample id, Moses's sentence id):
    such files know a prompt only by its position in the generation input, the gold's order.
    ``past_end`` ends the message of a number one past the last prompt (what a 1-based file's last is)."""
    if not _DIGITS.fullmatch(text):
        raise InputError(f"{what} {clip(text)} is not a number (ASCII digits only)", path, line)
    position = parse_digits(text)
    if position is None or position >= len(gold):
        shown = position if position is not None else f"of {len(text)} digits"
        hint = past_end if position == len(gold) else ""
        raise InputError(f"{what} {shown} is out of range: the gold has {len(gold)} prompts ({what} i is the gold's "
                         f"i-th prompt, from 0){hint}", path, line)
    return position


def check_known(gold: Gold, prompt_id: str, path: str, line: Optional[int]) -> None:
    if prompt_id not in gold:
        where = f" {gold.path}" if gold.path else ""
        raise InputError(f"prompt id {clip(prompt_id)} is not in the gold{where}", path, line)


def first_time(seen: Dict[Hashable, int], key: Hashable, what: str, path: str, line: int) -> None:
    """Remember the line of ``key``; a second occurrence is an error naming both lines."""
    if key in seen:
        raise InputError(f"duplicate {what} (first at line {seen[key]})", path, line)
    seen[key] = line


def check_field(text: str, forbidden: Iterable[str], what: str, fmt: str, path: str) -> None:
    """Writers refuse text that their format cannot hold (``forbidden``: characters or strings, and a NUL,
    which :class:`LineSource` refuses), rather than write a file that reads back wrong."""
    bad = [c for c in (*forbidden, "\0") if c in text]
    if bad:
        raise InputError(f"{what} {clip(text)} contains {bad[0]!r}, which a {fmt} file cannot hold", path)


def check_score(score: Optional[float], prompt_id: str, rank: int, fmt: str, path: str,
                holds_minus_inf: bool = True) -> None:
    """Writers refuse a score that would not read back: nan and +inf are no log-probability, and
    JSON cannot hold -inf (probability 0)."""
    if score is None or math.isfinite(score) or (holds_minus_inf and score == -math.inf):
        return
    why = "; write tsv, which holds -inf" if score == -math.inf else " (nan and +inf are no log-probability)"
    raise InputError(f"prompt {clip(prompt_id)}, rank {rank}: score {score} cannot be written to a {fmt} file{why}",
                     path)


def join_lines(lines: Iterable[str]) -> str:
    """File text: every line ends with ``\\n``."""
    return "".join(line + "\n" for line in lines)


def finite(value: Any) -> Any:
    """``value`` with every nan or infinite float, at any depth, as None: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def json_text(value: Any) -> str:
    """Strict JSON, which any parser reads (non-finite numbers as null, see :func:`finite`)."""
    return json.dumps(finite(value), ensure_ascii=False, allow_nan=False)
