"""Plain n-best output, as OpenNMT-py (``-n_best K``) and CTranslate2 write it: K lines per source sentence.

Lines 1..K are the gold's first prompt's list, lines K+1..2K the second's, and so on, each in rank
order, one hypothesis a line; every line counts (a blank one is an empty hypothesis) and there are no
scores. Any text file reads as one, so the format is never detected: ask for it with ``--format lines
--nbest-size K``. A file of any other length than (gold prompts) x K is an error, since its lists
would not line up with the prompts.

The writer writes every gold prompt's list, in gold order, when all have the same length K (a file
that reads back needs that; otherwise write tsv or jsonl), and drops scores.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

from ..data import Gold, Hyp, InputError, NBest
from .common import Group, Source, check_field, check_known, clip, join_lines, no_carriage_return, open_input


def _wrong_length(count: int, gold: Gold, nbest_size: int, path: str) -> InputError:
    """The error for a file of ``count`` lines, at its first line too many or its last line."""
    expected = len(gold) * nbest_size
    ready = count // nbest_size  # prompts whose lists are complete
    where = (f"line {expected + 1} is the first too many" if count > expected else
             f"it ends inside the list of prompt {clip(gold.prompts[ready].id)}" if count % nbest_size else
             f"the last {len(gold) - ready} prompt(s) have no lines")
    return InputError(f"the file has {count} lines, not {len(gold)} gold prompts x {nbest_size} (--nbest-size) = "
                      f"{expected}: {where} (a lines file has K lines per gold prompt, in gold order)",
                      path, min(count, expected + 1) or None)


def read_groups(source: Source, gold: Gold, nbest_size: int) -> Iterator[Group]:
    """Each prompt's K lines as soon as they are read; lines past the expected end are only counted,
    for the error."""
    expected = len(gold) * nbest_size
    count = 0
    hyps: List[Hyp] = []
    with open_input(source) as lines:
        for count, text in lines:
            if count > expected:
                continue
            no_carriage_return(text, lines.name, count)
            hyps.append(Hyp(text))
            if len(hyps) == nbest_size:
                yield gold.prompts[count // nbest_size - 1].id, hyps
                hyps = []
        if count != expected:
            raise _wrong_length(count, gold, nbest_size, lines.name)


def read_nbest(source: Source, gold: Gold, nbest_size: int) -> NBest:
    return dict(read_groups(source, gold, nbest_size))


def _check_same_size(nbest: NBest, gold: Gold, path: str) -> None:
    """Every gold prompt has a list, and all have the same length K >= 1: else the file would not read back."""
    for prompt_id in nbest:
        check_known(gold, prompt_id, path, None)
    missing = [prompt_id for prompt_id in gold.ids() if prompt_id not in nbest]
    if missing:
        raise InputError(f"gold prompt {clip(missing[0])} has no list, and a lines file has K lines for every gold "
                         f"prompt; write tsv or jsonl", path)
    sizes = sorted({len(hyps) for hyps in nbest.values()}) or [0]
    if len(sizes) > 1 or sizes[0] == 0:
        what = f"from {sizes[0]} to {sizes[-1]} hypotheses" if len(sizes) > 1 else "no hypotheses"
        raise InputError(f"the lists have {what}, and a lines file has K >= 1 lines for every gold prompt; write tsv "
                         f"or jsonl", path)


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    """Needs the gold for the order and the completeness of the lists."""
    if gold is None:
        raise InputError("writing a lines file needs the gold (line i*K+1 starts the gold's i-th prompt's list)", path)
    _check_same_size(nbest, gold, path)
    for hyps in nbest.values():
        for hyp in hyps:
            check_field(hyp.text, "\n\r", "hypothesis", "lines", path)
    return join_lines(hyp.text for prompt_id in gold.ids() for hyp in nbest[prompt_id])
