"""``--format auto``: guess an n-best file's format from its first lines, without consuming them.

Every format but ``lines`` (one hypothesis a line, which any text file looks like) is guessed.
"""

from __future__ import annotations

import re

from ..data import InputError
from .common import FORMATS, Source, clip, open_input
from .tsv import HEADER

FAIRSEQ_LINE = re.compile(r"[SHDPTWI]-[0-9]+\t")
#: a logging line: fairseq's (``2024-01-01 12:00:00 | INFO | fairseq...``), hydra's
#: (``[2024-01-01 12:00:00,000][fairseq...][INFO] - ...``) or Python's default (``INFO:fairseq...:``)
LOG_LINE = re.compile(r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[^\t]*?(\| *|\[)(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b"
                      r"|(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:")
MOSES_LINE = re.compile(r" *[0-9]+ *\|\|\|")  # the reader takes any padding around |||, so does detection
LOOKAHEAD = 200  # lines peeked at (within the peek's byte bound) for the first line that is not logging


def _is_tsv(line: str) -> bool:
    fields = line.split("\t")
    return line == HEADER or (len(fields) == 4 and re.fullmatch(r"[0-9]+", fields[1]) is not None)


def detect_format(source: Source) -> str:
    """One of :data:`FORMATS`, decided by the first line that is neither blank nor logging (tsv,
    jsonl, fairseq, moses, staple); logging before it (or only logging within :data:`LOOKAHEAD`
    lines) means fairseq output, which starts with its log.

    Given a :class:`~nbest_eval.formats.common.LineSource`, it only peeks: a reader then reads the
    same lines from the start.
    """
    with open_input(source) as lines:
        head = [text for _, text in lines.peek(LOOKAHEAD) if text.strip()]
        name = lines.name
    content = [line for line in head if not LOG_LINE.match(line)]
    if head and not content:
        return "fairseq"  # only logging so far: fairseq's, whose S-/H- lines come later
    first = content[0] if content else ""
    if _is_tsv(first):  # before jsonl: a tsv prompt id may start with '{'
        return "tsv"
    if first.startswith("{"):
        return "jsonl"
    if FAIRSEQ_LINE.match(first) or content[:1] != head[:1]:  # logging, then the output: fairseq's
        return "fairseq"
    if MOSES_LINE.match(first):
        return "moses"
    if "|" in first:
        return "staple"
    what = f"its first line {clip(first)}" if first else f"its first {LOOKAHEAD} lines (all blank)"
    guessed = ", ".join(f for f in FORMATS if f != "lines")
    raise InputError(f"cannot tell the n-best format from {what}; use --format with one of {guessed}, "
                     f"or lines with --nbest-size K (K lines per prompt)", name)
