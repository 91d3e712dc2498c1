"""STAPLE 2020 files: the gold (weighted valid translations) and the prediction file (n-best lists).

Both are blocks separated by blank lines, each opened by an ``ID|PROMPT`` line (split on the first
``|``). Gold lines below it are ``TRANSLATION|WEIGHT``, split on the *last* ``|`` because
translations may contain one; prediction lines are hypotheses, verbatim and best first. Prediction
files carry no scores: they read as None and are dropped on writing.

Weights are ASCII decimals (not ``+3``, ``1_0``, `` 3`` or other scripts' digits). Neither file can
hold a carriage return inside a line, so one there (CR-only line ends) is an error, not one long line.
A gold file read as predictions (a copy of the gold given as the n-best file) is an error too: its
hypotheses would be ``TRANSLATION|WEIGHT`` lines, none of them a translation, and every score 0.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..data import Gold, GoldPrompt, Hyp, InputError, NBest
from ..data import prompt_id as staple_id
from .common import (
    MAX_LINE_BYTES,
    Group,
    Line,
    Source,
    check_field,
    check_known,
    clip,
    first_time,
    join_lines,
    no_carriage_return,
    open_input,
    parse_decimal,
)

Block = List[Line]  # (line number, text) of each line of one block

#: hypothesis lines looked at to tell a gold file from predictions: a gold's all end in |WEIGHT
GOLD_LOOK = 3


def blocks(lines: Iterable[Line], path: str) -> Iterator[Block]:
    """The blocks of a file: runs of non-blank lines between blank (or whitespace-only) lines."""
    block: Block = []
    for number, text in lines:
        no_carriage_return(text, path, number)
        if text.strip():
            block.append((number, text))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _id_line(block: Block, path: str, seen: Dict[str, int]) -> Tuple[str, str]:
    """(id, prompt text) of the block's ``ID|PROMPT`` line; ids must be unique within a file."""
    number, text = block[0]
    pid, bar, prompt = text.partition("|")
    if not bar or not pid:
        raise InputError(f"expected an 'ID|PROMPT' line to open the block, got {clip(text)}", path, number)
    first_time(seen, pid, f"prompt id {clip(pid)}", path, number)
    return pid, prompt


def _not_an_id_line(text: str) -> Optional[str]:
    """Why a gold block's first line is rather a translation that lost its block's id line (to a stray
    blank line inside the block), or None. A prompt id has no whitespace, and a line ending in
    ``|NUMBER`` reads as a translation unless its id is the STAPLE id of its prompt (md5)."""
    pid, _, prompt = text.partition("|")
    if any(c.isspace() for c in pid):
        return f"{clip(pid)} cannot be a prompt id, which has no spaces"
    translation, _, weight = text.rpartition("|")
    if parse_decimal(weight) is None or pid == staple_id(prompt):
        return None
    return (f"{clip(text)} reads as translation {clip(translation)} with weight {weight}; if it is an id line whose "
            f"prompt is a number, the id must be the prompt's STAPLE id ({staple_id(prompt)})")


def _reads_as_translation(text: str) -> bool:
    """Whether a line is a gold's ``TRANSLATION|WEIGHT`` line (a finite non-negative weight)."""
    _, bar, weight = text.rpartition("|")
    value = parse_decimal(weight) if bar else None
    return value is not None and math.isfinite(value) and value >= 0


def _not_gold(found: Iterator[Block], path: str) -> Iterator[Block]:
    """``found``, unless they are a gold's: when the first :data:`GOLD_LOOK` hypothesis lines (all
    of them, in a smaller file) all read as ``TRANSLATION|WEIGHT``, the file is refused at the first.
    A hypothesis ending in ``|NUMBER`` among ordinary ones is read as it is."""
    head: List[Block] = []
    for block in found:
        head.append(block)
        if sum(len(b) - 1 for b in head) >= GOLD_LOOK:
            break
    hyps = [line for block in head for line in block[1:]][:GOLD_LOOK]
    if hyps and all(_reads_as_translation(text) for _, text in hyps):
        number, text = hyps[0]
        raise InputError(f"this looks like a STAPLE gold file (translation|weight lines), not predictions: its "
                         f"first hypotheses all end in |WEIGHT, as {clip(text)}; give the model's n-best lists",
                         path, number)
    yield from head
    yield from found


def _translation(number: int, text: str, path: str) -> Tuple[str, float]:
    translation, bar, weight_text = text.rpartition("|")
    if not bar:
        raise InputError(f"expected a 'TRANSLATION|WEIGHT' line, got one with no '|': {clip(text)}", path, number)
    weight = parse_decimal(weight_text)
    if weight is None:
        raise InputError(f"weight {clip(weight_text)} is not a number: expected 'TRANSLATION|WEIGHT' with a finite "
                         f"non-negative weight in ASCII digits, like 0.25 or 2e-05", path, number)
    if not math.isfinite(weight) or weight < 0:
        raise InputError(f"weight {clip(weight_text)} must be a finite non-negative number", path, number)
    return translation, weight


def read_gold(source: Source, max_line_bytes: int = MAX_LINE_BYTES) -> Gold:
    """A STAPLE gold file (a path, ``-`` for standard input, or a LineSource); nil-answer prompts (an
    id line alone) are kept with no translations."""
    prompts: List[GoldPrompt] = []
    seen: Dict[str, int] = {}
    with open_input(source, max_line_bytes) as lines:
        name = lines.name
        for block in blocks(lines, name):
            number, first = block[0]
            problem = _not_an_id_line(first) if "|" in first else None
            if problem:
                raise InputError(f"block has no 'ID|PROMPT' line: {problem} (a blank line inside a block?)",
                                 name, number)
            pid, text = _id_line(block, name, seen)
            translations = tuple(_translation(n, line, name) for n, line in block[1:])
            prompts.append(GoldPrompt(pid, text, translations))
    if not prompts:
        raise InputError("empty gold file: expected blocks of an 'ID|PROMPT' line and 'TRANSLATION|WEIGHT' "
                         "lines", name)
    return Gold(prompts, name)


def read_groups(source: Source, gold: Gold) -> Iterator[Group]:
    """A STAPLE prediction file's blocks, as they are read: one per prompt, one hypothesis per line
    (no scores). A gold file is refused (:func:`_not_gold`)."""
    seen: Dict[str, int] = {}
    with open_input(source) as lines:
        for block in _not_gold(blocks(lines, lines.name), lines.name):
            pid, _ = _id_line(block, lines.name, seen)
            check_known(gold, pid, lines.name, block[0][0])
            yield pid, [Hyp(text) for _, text in block[1:]]


def read_nbest(source: Source, gold: Gold) -> NBest:
    return dict(read_groups(source, gold))


def _id_text(prompt_id: str, prompt: str, path: str) -> str:
    if not prompt_id or any(c == "|" or c.isspace() for c in prompt_id):
        raise InputError(f"prompt id {clip(prompt_id)} is empty or contains '|' or whitespace, which a STAPLE "
                         f"file cannot hold", path)
    check_field(prompt, "\n\r", "prompt", "STAPLE", path)
    return f"{prompt_id}|{prompt}"


def format_gold(gold: Gold, path: str) -> str:
    lines = []
    for prompt in gold:
        lines.append(_id_text(prompt.id, prompt.text, path))
        for text, weight in prompt.translations:
            check_field(text, "\n\r", "translation", "STAPLE", path)
            lines.append(f"{text}|{float(weight)!r}")
        lines.append("")
    return join_lines(lines)


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    """Needs the gold for the prompt text of the id lines."""
    if gold is None:
        raise InputError("writing a STAPLE prediction file needs the gold (for the prompt texts)", path)
    lines = []
    for prompt_id, hyps in nbest.items():
        check_known(gold, prompt_id, path, None)
        lines.append(_id_text(prompt_id, gold[prompt_id].text, path))
        for hyp in hyps:
            check_field(hyp.text, "\n\r", "hypothesis", "STAPLE", path)
            if not hyp.text.strip():
                raise InputError(f"prompt {prompt_id!r} has a blank hypothesis, which a STAPLE file cannot hold "
                                 f"(it would end the block); use tsv or jsonl", path)
            lines.append(hyp.text)
        lines.append("")
    return join_lines(lines)
