"""Source lines -> gold prompts: the one rule both training adapters use to find, for each line of
their validation sources, the gold prompt it is scored against.

``id`` (default): a line's prompt is the gold prompt with that exact text, else the one whose id is
``prompt_`` + md5 of the lowercased line (how STAPLE makes ids). Every line must be a gold prompt,
so a gold that belongs to other sources stops the run instead of giving wrong numbers; gold prompts
that no line names are left out (``unmatched`` counts them, and the adapters say so), so a gold may
cover more than the sources. ``order``: line i is gold prompt i; the counts must be equal, and most
lines must be their prompt's text (:func:`same_text`), so that a gold of other prompts, or a
forgotten BPE removal, stops the run instead of scoring 0 for ever. Either way a prompt that comes
back on a later line is generated and scored once.

The messages advise the caller's own settings (:class:`OptionNames`): fairseq's ``--nbest-map``,
the Hugging Face evaluator's ``prompt_map=``, ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from ..data import Gold, InputError, prompt_id
from ..prompt import norm

MAP_MODES = ("id", "order")


@dataclass(frozen=True)
class OptionNames:
    """How a caller spells the settings that a mismatch message advises: ``order``, matching line i
    to gold prompt i; ``undo``, what makes a source line the gold's prompt text. The defaults name
    no framework; each adapter passes its own (fairseq: ``--nbest-map order``, ...)."""

    order: str = "matching by order"
    undo: str = "the source lines are the prompts' text as the gold writes them (any preprocessing undone)"


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
                  what: str = "the 'valid' split", unk: Optional[str] = None,
                  names: OptionNames = OptionNames()) -> PromptMatch:
    """Match ``sources`` (decoded source lines, named ``what`` in messages) to ``gold`` by ``mode``.

    ``max_prompts`` keeps the first N distinct prompts (in line order). ``unk``: the unknown-word
    symbol, whose presence explains why a line cannot be matched by id. Any mismatch raises
    :class:`InputError` naming the line and what to do, in the caller's ``names``.
    """
    if mode not in MAP_MODES:
        raise InputError(f"the prompt matching mode must be one of {', '.join(MAP_MODES)}, got {mode!r}")
    if max_prompts is not None and max_prompts < 1:
        raise InputError(f"the maximum number of prompts must be >= 1, got {max_prompts}")
    where = f"the gold {gold.path}" if gold.path else "the gold"
    if not sources:
        raise InputError(f"{what} is empty: nothing to score against {where}")
    if mode == "id":
        ids = _by_id(sources, gold, what, where, unk, names)
    else:
        ids = _by_order(sources, gold, what, where, unk, names)
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


def _by_id(sources: Sequence[str], gold: Gold, what: str, where: str, unk: Optional[str], names: OptionNames):
    by_text = {p.text: p.id for p in gold}
    ids = []
    for line, text in enumerate(sources, 1):
        pid = by_text.get(text) or prompt_id(text)
        if pid not in gold:
            order = (f"match by position ({names.order}) only if the two files hold the same prompts in the same "
                     f"order: line 1 of {what} must be the sentence of prompt 1 of {where}, "
                     f"{gold.prompts[0].text!r} (it is {sources[0]!r})")
            hint = ("the line holds <unk> (words missing from the dictionary), so its text cannot be recovered: "
                    if unk and unk in text.split() else
                    f"check that the gold belongs to these sources and that {names.undo}; ")
            raise InputError(f"line {line} of {what}, {text!r}, is not a prompt of {where} "
                             f"(its id would be {prompt_id(text)}); {hint}{order}")
        ids.append(pid)
    return ids


def _by_order(sources: Sequence[str], gold: Gold, what: str, where: str, unk: Optional[str], names: OptionNames):
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
    _check_pairs(sources, gold, what, where, unk, names)
    return gold.ids()


def same_text(source: str, prompt: str) -> bool:
    """Whether a source line is its prompt's text as the scorer compares translations (case,
    punctuation, spacing aside: :func:`nbest_eval.prompt.norm`), so that lowercased or tokenized
    sources still count."""
    return norm(source).split() == norm(prompt).split()


def _check_pairs(sources: Sequence[str], gold: Gold, what: str, where: str, unk: Optional[str], names: OptionNames):
    """Refuse order matching when fewer than half of the lines that can be read (no ``unk``) are
    their paired prompt's text: the gold is then of other prompts, or the sources are not text the
    gold knows (BPE left in), and every list would score 0."""
    pairs = [(line, text, prompt.text) for line, (text, prompt) in enumerate(zip(sources, gold), 1)
             if not (unk and unk in text.split())]
    unequal = [pair for pair in pairs if not same_text(pair[1], pair[2])]
    if 2 * len(unequal) <= len(pairs):
        return
    line, text, prompt = unequal[0]
    raise InputError(f"matching by order pairs line i of {what} with prompt i of {where}, but only "
                     f"{len(pairs) - len(unequal)} of {len(pairs)} lines are their prompt's text (case, punctuation "
                     f"and spacing aside), e.g. line {line}, {text!r}, is paired with {prompt!r}: the gold is of "
                     f"other prompts (or of these in another order), or the sources are not the gold's text; check "
                     f"that {names.undo}. Sources that differ from the prompts by design (another language) need a "
                     f"gold whose prompt lines are those sources (same ids)")
