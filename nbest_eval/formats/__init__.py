"""Readers and writers of gold and n-best files, plus a TREC export.

    gold = read_gold("dev.gold.txt")                       # STAPLE gold
    nbest = read_nbest("out.txt", gold)                    # format guessed: staple, fairseq, tsv, jsonl, moses
    nbest = read_nbest("-", gold)                          # standard input, read once
    nbest = read_nbest("pred.txt", gold, "lines", nbest_size=5)  # OpenNMT-style: 5 lines per prompt, never guessed
    write_nbest(nbest, "out.tsv", "tsv")                   # any format but fairseq; never overwrites by default
    save_nbest(nbest, "runs/nbest", "step100", "tsv")      # a new file every time: step100.tsv, step100-2.tsv...
    write_trec(gold, nbest, "out.run", "out.qrels")        # for trec_eval / ir_measures

Readers check every prompt id against the gold and report problems as
:class:`~nbest_eval.data.InputError` with the file and the 1-based line. Every input is opened once
and read in lines of at most ``max_line_bytes``, so pipes, FIFOs and ``-`` (standard input) work and
no input makes memory grow without bound; :class:`LineSource` is such an open input, which
:func:`detect_format` peeks at and a reader then reads from the start.

Numbers are strict ASCII decimals (no ``+``, ``_``, spaces or other scripts' digits; ranks are
digits only). A score may also be ``-inf`` (a valid log-probability); nan and +inf are refused on
reading and writing, and JSON, having no infinity, refuses -inf on writing rather than change it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Set

from ..data import Gold, InputError, NBest
from ..files.output import PLAIN_NAME, PathLike, all_or_nothing, make_folder, unused_stem, write_text
from . import fairseq, jsonl, moses, staple, tsv
from . import lines as lines_format
from .common import FORMATS, MAX_LINE_BYTES, Group, LineSource, Source, Ungrouped, json_text, open_input
from .detect import detect_format
from .shard import KEY_OF_LINE, byte_range, open_part
from .staple import read_gold
from .trec import write_trec

_READERS = {"staple": staple.read_nbest, "fairseq": fairseq.read_nbest, "tsv": tsv.read_nbest,
            "jsonl": jsonl.read_nbest, "moses": moses.read_nbest, "lines": lines_format.read_nbest}
_GROUP_READERS = {"staple": staple.read_groups, "fairseq": fairseq.read_groups, "tsv": tsv.read_groups,
                  "jsonl": jsonl.read_groups, "moses": moses.read_groups, "lines": lines_format.read_groups}
_WRITERS = {"staple": staple.format_nbest, "tsv": tsv.format_nbest, "jsonl": jsonl.format_nbest,
            "moses": moses.format_nbest, "lines": lines_format.format_nbest}


def _options(format: str, path: str, allow_rank_gaps: bool, nbest_size: Optional[int]) -> Dict[str, Any]:
    """What ``format``'s reader takes: tsv ``allow_rank_gaps``; lines ``nbest_size``, which it needs and
    no other format takes (one given to another format means the wrong format was asked for or detected)."""
    if format == "lines":
        if not isinstance(nbest_size, int) or nbest_size < 1:
            raise InputError(f"the lines format needs nbest_size (--nbest-size K), the number of hypotheses per "
                             f"prompt, an integer >= 1; got {nbest_size!r}", path)
        return {"nbest_size": nbest_size}
    if nbest_size is not None:
        raise InputError(f"nbest_size (--nbest-size) is for the lines format only, not {format}", path)
    return {"allow_rank_gaps": allow_rank_gaps} if format == "tsv" else {}


def read_nbest(source: Source, gold: Gold, format: str = "auto", *, max_line_bytes: int = MAX_LINE_BYTES,
               allow_rank_gaps: bool = False, nbest_size: Optional[int] = None) -> NBest:
    """The n-best lists of a file (a path, ``-`` for standard input, or a :class:`LineSource`), in gold
    order; ``format`` is one of :data:`FORMATS` or ``auto``. ``allow_rank_gaps``: tsv ranks may skip.
    ``nbest_size``: the K of the lines format (K lines per prompt), required by it and by it only.

    A file with no n-best list at all is an error: scoring it would silently give all zeros.
    """
    if format != "auto" and format not in _READERS:
        raise InputError(f"unknown n-best format {format!r}; choose one of auto, {', '.join(FORMATS)}")
    with open_input(source, max_line_bytes) as lines:
        format = detect_format(lines) if format == "auto" else format
        nbest = _READERS[format](lines, gold, **_options(format, lines.name, allow_rank_gaps, nbest_size))
    if not nbest:
        raise InputError(f"no n-best list found (read as {format})", lines.name)
    return {prompt_id: nbest[prompt_id] for prompt_id in gold.ids() if prompt_id in nbest}


def iter_nbest(lines: LineSource, gold: Gold, format: str, *, allow_rank_gaps: bool = False,
               nbest_size: Optional[int] = None) -> Iterator[Group]:
    """Each prompt's list as soon as the reader has it, in file order, so that scoring needs one
    list in memory at a time. A file whose lines are not grouped by prompt raises :class:`Ungrouped`
    on the first prompt that comes back (read it with :func:`read_nbest` instead). The options are
    :func:`read_nbest`'s."""
    if format not in _GROUP_READERS:
        raise InputError(f"unknown n-best format {format!r}; choose one of {', '.join(FORMATS)}")
    empty = True
    for group in _GROUP_READERS[format](lines, gold, **_options(format, lines.name, allow_rank_gaps, nbest_size)):
        empty = False
        yield group
    if empty:
        raise InputError(f"no n-best list found (read as {format})", lines.name)


class FileParts:
    """An n-best file (not a stream) read in ``parts`` parts, one per ``score --jobs`` worker (see
    :mod:`~nbest_eval.formats.shard`): in the formats of :data:`~nbest_eval.formats.shard.KEY_OF_LINE`
    byte ranges cut at prompt boundaries, in the others the whole file, of which part k keeps the
    prompts at gold positions k, k + parts, ... . Made in the process that detected the format on
    ``lines``, the file's first lines; the parts are read in worker processes."""

    def __init__(self, lines: LineSource, gold: Gold, format: str, *, allow_rank_gaps: bool = False,
                 nbest_size: Optional[int] = None):
        self.path, self.max_line_bytes, self.gold, self.format = lines.name, lines.max_line_bytes, gold, format
        self.options = _options(format, lines.name, allow_rank_gaps, nbest_size)
        self.ranges = format in KEY_OF_LINE
        if format == "moses":  # a check of the file's first lines, which no part but the first has
            moses.check_zero_based(lines, gold)

    def read(self, part: int, parts: int) -> Iterator[Group]:
        """Part ``part``'s lists, in file order (each prompt once within a part: the readers check)."""
        if self.ranges:
            with open_part(self.path, self.format, part, parts, self.max_line_bytes) as lines:
                yield from _GROUP_READERS[self.format](lines, self.gold, **self.options)
            return
        mine: Set[str] = set(self.gold.ids()[part::parts])
        with open_input(self.path, self.max_line_bytes) as lines:
            yield from (group for group in _GROUP_READERS[self.format](lines, self.gold, **self.options)
                        if group[0] in mine)

    def ungrouped(self, prompt_id: str, part: int, parts: int) -> Ungrouped:
        """The error for a prompt also read in an earlier part: the file is not grouped by prompt."""
        with open(self.path, "rb") as file:
            first_line = byte_range(file, self.format, part, parts, self.max_line_bytes).first_line
        return Ungrouped(prompt_id, self.path, first_line, "comes back after other prompts (in the lines from here)")

    def nothing_found(self) -> InputError:
        return InputError(f"no n-best list found (read as {self.format})", self.path)


def write_gold(gold: Gold, path: PathLike, overwrite: bool = False) -> None:
    """Write a STAPLE gold file (``-``: standard output)."""
    write_text(path, staple.format_gold(gold, os.fspath(path)), overwrite)


def write_nbest(nbest: NBest, path: PathLike, format: str, gold: Optional[Gold] = None,
                overwrite: bool = False) -> None:
    """Write in ``format`` (any of :data:`FORMATS` but fairseq; staple, moses and lines need ``gold``,
    staple and lines drop scores); ``-`` is standard output."""
    if format not in _WRITERS:
        raise InputError(f"cannot write n-best format {format!r}; choose one of {', '.join(_WRITERS)}")
    write_text(path, _WRITERS[format](nbest, gold, os.fspath(path)), overwrite)


#: file name suffix of each format that :func:`write_nbest` writes
SUFFIXES = {"staple": ".txt", "tsv": ".tsv", "jsonl": ".jsonl"}


def save_nbest(nbest: NBest, directory: PathLike, stem: str, format: str = "tsv", gold: Optional[Gold] = None,
               record: Optional[Mapping[str, Any]] = None) -> Path:
    """Write ``nbest`` to ``directory/stem.<format suffix>`` (plus ``record`` as ``stem.json``) without
    replacing anything: when the name is taken, ``stem-2``, ``stem-3``, ... . The one writer of the
    training adapters' n-best lists; returns the n-best file's path. ``record`` is written as strict
    JSON (nan and infinite values as null)."""
    if format not in SUFFIXES:
        raise InputError(f"cannot save n-best lists as {format!r}; choose one of {', '.join(SUFFIXES)}")
    if not PLAIN_NAME.fullmatch(stem):
        raise InputError(f"file name stem {stem!r} is not a plain name (letters, digits, '_', '-', '.'): it would "
                         f"reach outside the folder", os.fspath(directory))
    make_folder(directory)
    suffixes = (SUFFIXES[format], ".json") if record is not None else (SUFFIXES[format],)
    stem_path = unused_stem(os.path.join(os.fspath(directory), stem), suffixes, "-")
    path = Path(stem_path + SUFFIXES[format])
    with all_or_nothing():  # never a list without its record, nor a half-written file (a full disk)
        write_nbest(nbest, path, format, gold=gold)
        if record is not None:
            write_text(stem_path + ".json", json_text({"nbest": path.name, **record}) + "\n")
    return path


__all__ = ["FORMATS", "MAX_LINE_BYTES", "SUFFIXES", "Group", "LineSource", "Ungrouped", "open_input", "detect_format",
           "read_gold", "read_nbest", "iter_nbest", "FileParts", "write_gold", "write_nbest", "save_nbest",
           "write_trec"]
