"""``--format auto``: guess an n-best file's format from its first lines, without consuming them.

Every format but ``lines`` (one hypothesis a line, which any text file looks like) is guessed.
"""

from __future__ import annotations

import re

from ..data import InputError
from .common import FORMATS, Source, clip, open_input
from .tsv import HEADER

FAIRSEQ_LINE = re.compile(r"[SHDPTWI]-[0-9]+\t")
MOSES_LINE = re.compile(r"[0-9]+ \|\|\| ")
LOOKAHEAD = 200  # lines searched for fairseq output behind its logging (which contains '|')


def _is_tsv(line: str) -> bool:
    fields = line.split("\t")
    return line == HEADER or (len(fields) == 4 and re.fullmatch(r"[0-9]+", fields[1]) is not None)


def detect_format(source: Source) -> str:
    """One of :data:`FORMATS`, decided by the first non-blank line (jsonl, fairseq, moses, tsv, staple) or,
    for fairseq output that starts with log lines, by an S-/H-/... line within :data:`LOOKAHEAD` lines.

    Given a :class:`~nbest_eval.formats.common.LineSource`, it only peeks: a reader then reads the
    same lines from the start.
    """
    with open_input(source) as lines:
        head = [text for _, text in lines.peek(LOOKAHEAD) if text.strip()]
        name = lines.name
    first = head[0] if head else ""
    if first.startswith("{"):
        return "jsonl"
    if FAIRSEQ_LINE.match(first):
        return "fairseq"
    if MOSES_LINE.match(first):
        return "moses"
    if _is_tsv(first):
        return "tsv"
    if any(FAIRSEQ_LINE.match(line) for line in head):
        return "fairseq"
    if "|" in first:
        return "staple"
    what = f"its first line {clip(first)}" if first else f"its first {LOOKAHEAD} lines (all blank)"
    guessed = ", ".join(f for f in FORMATS if f != "lines")
    raise InputError(f"cannot tell the n-best format from {what}; use --format with one of {guessed}, "
                     f"or lines with --nbest-size K (K lines per prompt)", name)
