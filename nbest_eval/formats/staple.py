"""STAPLE 2020 files: the gold (weighted valid translations) and the prediction file (n-best lists).

Both are blocks separated by blank lines, each opened by an ``ID|PROMPT`` line (split on the first
``|``). Gold lines below it are ``TRANSLATION|WEIGHT``, split on the *last* ``|`` because
translations may contain one; prediction lines are hypotheses, verbatim and best first. Prediction
files carry no scores: they read as None and are dropped on writing.
"""

from __future__ import annotations

import math
import os
from typing import Dict, Iterator, List, Optional, Tuple

from ..data import Gold, GoldPrompt, Hyp, InputError, NBest
from .common import PathLike, check_field, check_known, first_time, join_lines, parse_float, read_lines

Block = List[Tuple[int, str]]  # (line number, text) of each line of one block


def blocks(path: PathLike) -> Iterator[Block]:
    """The blocks of a file: runs of non-blank lines between blank (or whitespace-only) lines."""
    block: Block = []
    for number, text in read_lines(path):
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
    prompt_id, bar, prompt = text.partition("|")
    if not bar or not prompt_id:
        raise InputError(f"expected an 'ID|PROMPT' line to open the block, got {text!r}", path, number)
    first_time(seen, prompt_id, f"prompt id {prompt_id!r}", path, number)
    return prompt_id, prompt


def _looks_like_translation(text: str) -> bool:
    """A heuristic for a block that lost its id line (say, to a stray blank line inside a block):
    ids have no whitespace and prompts are not numbers, while translation lines end in ``|WEIGHT``."""
    prompt_id = text.partition("|")[0]
    number = parse_float(text.rpartition("|")[2])
    return any(c.isspace() for c in prompt_id) or (number is not None and math.isfinite(number))


def _translation(number: int, text: str, path: str) -> Tuple[str, float]:
    translation, bar, weight_text = text.rpartition("|")
    if not bar:
        raise InputError(f"expected a 'TRANSLATION|WEIGHT' line, got one with no '|': {text!r}", path, number)
    weight = parse_float(weight_text)
    if weight is None:
        raise InputError(f"weight {weight_text!r} is not a number (expected 'TRANSLATION|WEIGHT')", path, number)
    if not math.isfinite(weight) or weight < 0:
        raise InputError(f"weight {weight_text!r} must be a finite non-negative number", path, number)
    return translation, weight


def read_gold(path: PathLike) -> Gold:
    """A STAPLE gold file; nil-answer prompts (an id line alone) are kept with no translations."""
    name = os.fspath(path)
    prompts: List[GoldPrompt] = []
    seen: Dict[str, int] = {}
    for block in blocks(path):
        number, first = block[0]
        if "|" in first and _looks_like_translation(first):
            raise InputError("block has no 'ID|PROMPT' line: its first line looks like a 'TRANSLATION|WEIGHT' "
                             "line (a blank line inside a block?)", name, number)
        prompt_id, text = _id_line(block, name, seen)
        translations = tuple(_translation(n, line, name) for n, line in block[1:])
        prompts.append(GoldPrompt(prompt_id, text, translations))
    if not prompts:
        raise InputError("empty gold file: expected blocks of an 'ID|PROMPT' line and 'TRANSLATION|WEIGHT' "
                         "lines", name)
    return Gold(prompts, name)


def read_nbest(path: PathLike, gold: Gold) -> NBest:
    """A STAPLE prediction file: one block per prompt, one hypothesis per line (no scores)."""
    name = os.fspath(path)
    nbest: NBest = {}
    seen: Dict[str, int] = {}
    for block in blocks(path):
        prompt_id, _ = _id_line(block, name, seen)
        check_known(gold, prompt_id, name, block[0][0])
        nbest[prompt_id] = [Hyp(text) for _, text in block[1:]]
    return nbest


def _id_text(prompt_id: str, prompt: str, path: str) -> str:
    if not prompt_id or any(c == "|" or c.isspace() for c in prompt_id):
        raise InputError(f"prompt id {prompt_id!r} is empty or contains '|' or whitespace, which a STAPLE "
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
