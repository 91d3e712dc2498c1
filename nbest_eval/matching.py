"""Source lines -> gold prompts: the one rule both training adapters use to find, for each line of
their validation sources, the gold prompt it is scored against.

``id`` (default): a line's prompt is the gold prompt with that exact text, else the one whose id is
``prompt_`` + md5 of the lowercased line (how STAPLE makes ids). Every line must be a gold prompt,
so a gold that belongs to other sources stops the run instead of giving wrong numbers; gold prompts
that no line names are left out (``unmatched`` counts them, and the adapters say so), so a gold may
cover more than the sources. ``order``: line i is gold prompt i, and the counts must be equal.
Either way a prompt that comes back on a later line is generated and scored once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from .data import Gold, InputError, prompt_id

MAP_MODES = ("id", "order")


@dataclass
class PromptMatch:
    """Which source lines are scored, and as which gold prompt.

    ``gold`` holds the scored prompts in line order; ``rows`` maps the (0-based) line of each
    prompt's first occurrence to its prompt id; ``repeats`` counts the lines that repeat an earlier
    one, ``unmatched`` the gold prompts that no line names.
    """

    gold: Gold
    rows: Dict[int, str]
    mode: str = "id"
    repeats: int = 0
    unmatched: int = 0

    def summary(self) -> str:
        """What was matched, for the adapters' logs."""
        text = f"{len(self)} prompts matched by {self.mode}"
        if self.repeats:
            text += f"; {self.repeats} repeated line(s) scored once"
        if self.unmatched:
            text += f"; {self.unmatched} gold prompt(s) named by no line are not scored"
        return text

    def __len__(self) -> int:
        return len(self.rows)


def match_prompts(sources: Sequence[str], gold: Gold, mode: str = "id", max_prompts: Optional[int] = None,
                  what: str = "the 'valid' split", unk: Optional[str] = None) -> PromptMatch:
    """Match ``sources`` (decoded source lines, named ``what`` in messages) to ``gold`` by ``mode``.

    ``max_prompts`` keeps the first N distinct prompts (in line order). ``unk``: the unknown-word
    symbol, whose presence explains why a line cannot be matched by id. Any mismatch raises
    :class:`InputError` naming the line and what to do.
    """
    if mode not in MAP_MODES:
        raise InputError(f"the prompt matching mode must be one of {', '.join(MAP_MODES)}, got {mode!r}")
    if max_prompts is not None and max_prompts < 1:
        raise InputError(f"the maximum number of prompts must be >= 1, got {max_prompts}")
    where = f"the gold {gold.path}" if gold.path else "the gold"
    if not sources:
        raise InputError(f"{what} is empty: nothing to score against {where}")
    ids = _by_id(sources, gold, what, where, unk) if mode == "id" else _by_order(sources, gold, what, where)
    rows: Dict[int, str] = {}
    first = set()
    for index, pid in enumerate(ids):
        if pid in first:
            continue
        if max_prompts is not None and len(first) >= max_prompts:
            break
        first.add(pid)
        rows[index] = pid
    kept = Gold([gold[pid] for pid in rows.values()], gold.path)
    return PromptMatch(kept, rows, mode, repeats=len(ids) - len(set(ids)), unmatched=len(gold) - len(set(ids)))


def _by_id(sources: Sequence[str], gold: Gold, what: str, where: str, unk: Optional[str]):
    by_text = {p.text: p.id for p in gold}
    ids = []
    for line, text in enumerate(sources, 1):
        pid = by_text.get(text) or prompt_id(text)
        if pid not in gold:
            hint = ("; the line holds <unk> (words missing from the dictionary), so its text cannot be "
                    "recovered: match by position (fairseq --nbest-map order, Hugging Face prompt_map='order')"
                    if unk and unk in text.split() else
                    "; check that the gold belongs to these sources and that the source preprocessing is undone "
                    "(fairseq --nbest-remove-bpe/--nbest-detok), or match by position (--nbest-map order, "
                    "prompt_map='order')")
            raise InputError(f"line {line} of {what}, {text!r}, is not a prompt of {where} "
                             f"(its id would be {prompt_id(text)}){hint}")
        ids.append(pid)
    return ids


def _by_order(sources: Sequence[str], gold: Gold, what: str, where: str):
    if len(sources) != len(gold):
        raise InputError(f"{what} has {len(sources)} lines but {where} has {len(gold)} prompts: matching by "
                         f"order needs exactly one gold prompt per line, in the same order")
    position = {p.id: i for i, p in enumerate(gold)}
    for line, text in enumerate(sources, 1):
        other = position.get(prompt_id(text))
        if other is not None and other != line - 1:
            raise InputError(f"line {line} of {what}, {text!r}, is prompt {other + 1} of {where}, but matching "
                             f"by order pairs it with prompt {line} ({gold.prompts[line - 1].text!r}): the two "
                             f"files are not in the same order")
    return gold.ids()
