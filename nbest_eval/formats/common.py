"""What every format shares: numbered UTF-8 lines, number parsing, id checks."""

from __future__ import annotations

import math
import os
from typing import Dict, Hashable, Iterable, Iterator, Optional, Tuple

from ..data import Gold, InputError
from ..output import PathLike

#: the n-best formats that :func:`nbest_eval.formats.read_nbest` understands
FORMATS = ("staple", "fairseq", "tsv", "jsonl")


def read_lines(path: PathLike) -> Iterator[Tuple[int, str]]:
    """(1-based line number, text) of every line, without its ``\\n``, a trailing ``\\r`` or a BOM.

    Lines are split on ``\\n`` only (not on a lone ``\\r`` or U+2028, which may occur inside a
    translation), so the numbers match what an editor shows.
    """
    name = os.fspath(path)
    try:
        with open(path, "rb") as file:
            for number, raw in enumerate(file, 1):
                raw = raw[:-1] if raw.endswith(b"\n") else raw
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise InputError(f"not UTF-8 text (bad byte at column {err.start + 1})", name, number) from None
                yield number, text.removeprefix("\ufeff") if number == 1 else text
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", name) from None


def parse_float(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def parse_score(text: str, path: str, line: int) -> float:
    """A model score: any number but nan (-inf is a valid log-probability)."""
    value = parse_float(text)
    if value is None or math.isnan(value):
        raise InputError(f"score {text!r} is not a number", path, line)
    return value


def check_known(gold: Gold, prompt_id: str, path: str, line: Optional[int]) -> None:
    if prompt_id not in gold:
        where = f" {gold.path}" if gold.path else ""
        raise InputError(f"prompt id {prompt_id!r} is not in the gold{where}", path, line)


def first_time(seen: Dict[Hashable, int], key: Hashable, what: str, path: str, line: int) -> None:
    """Remember the line of ``key``; a second occurrence is an error naming both lines."""
    if key in seen:
        raise InputError(f"duplicate {what} (first at line {seen[key]})", path, line)
    seen[key] = line


def check_field(text: str, forbidden: str, what: str, fmt: str, path: str) -> None:
    """Writers refuse text that their format cannot hold, rather than write a file that reads back wrong."""
    bad = [c for c in forbidden if c in text]
    if bad:
        raise InputError(f"{what} {text!r} contains {bad[0]!r}, which a {fmt} file cannot hold", path)


def join_lines(lines: Iterable[str]) -> str:
    """File text: every line ends with ``\\n``."""
    return "".join(line + "\n" for line in lines)
