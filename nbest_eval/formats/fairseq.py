"""fairseq-generate / fairseq-interactive output, run with ``--nbest N``.

Sample id ``i`` (``S-i``, ``H-i``, ``D-i``) is the i-th prompt of the gold, 0-based in gold order, as
in the official STAPLE tooling: generate from the gold's prompts in file order. Each sample's ``D-``
lines (detokenized, after ``--post-process``) are used where it has any, else its ``H-`` lines; an
``H-``/``D-`` line needs all three fields, ``KIND-ID<TAB>SCORE<TAB>HYPOTHESIS`` (the hypothesis may be
empty). Hypotheses of one sample keep file order, which is fairseq's best-first order.

An ``S-i`` line (the source fairseq read) must be gold prompt i up to case, punctuation, spacing,
Unicode compatibility forms and HTML entities (so tokenized sources match), each ``<unk>`` standing
for any text: a mismatch means that the output and the gold are in different orders, which would
give wrong numbers, so it is an error. Everything else (T-, P-, W-, I-, A- lines, logging) is ignored.

Scores: fairseq prints its natural-log score divided by ln 2 (base 2), so each score is multiplied by
ln 2 to give the natural-log :attr:`~nbest_eval.data.Hyp.score`. It is the score fairseq printed,
length-normalized unless generation ran with ``--unnormalized``.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from typing import Dict, Iterator, List, Tuple

from ..data import Gold, Hyp, InputError, NBest
from ..prompt import norm
from .common import Group, LineSource, Source, Ungrouped, clip, gold_position, open_input, parse_digits, parse_score

_LINE = re.compile(r"([SHD])-([0-9]+)(?=\t|$)")
UNK = "<unk>"


def _hypotheses(lines: LineSource, gold: Gold) -> Iterator[Tuple[int, str, int, Hyp]]:
    """(line number, kind H or D, sample, hypothesis) of every H-/D- line; S- lines are checked."""
    name = lines.name
    for number, line in lines:
        match = _LINE.match(line)
        if not match:
            continue
        kind, rest = match.group(1), line[match.end():]
        if kind == "S":
            sample = parse_digits(match.group(2))
            if sample is not None and sample < len(gold):
                _check_source(rest[1:], sample, gold, name, number)
            continue
        sample = gold_position(gold, match.group(2), "sample id", name, number)
        fields = rest.split("\t", 2)  # '', score, hypothesis
        if len(fields) < 3:
            raise InputError(f"truncated {kind}- line: expected '{kind}-ID<TAB>SCORE<TAB>HYPOTHESIS' "
                             f"(an empty hypothesis still has both tabs)", name, number)
        yield number, kind, sample, Hyp(fields[2], parse_score(fields[1], name, number) * math.log(2))


def read_nbest(source: Source, gold: Gold) -> NBest:
    found: Dict[str, Dict[int, List[Hyp]]] = {"H": {}, "D": {}}  # kind -> sample -> hypotheses
    current: Dict[str, int] = {}  # kind -> the sample whose lines are being read
    with open_input(source) as lines:
        for number, kind, sample, hyp in _hypotheses(lines, gold):
            if current.get(kind) != sample and sample in found[kind]:
                raise InputError(f"sample id {sample} appears again after other samples (fairseq writes a sample's "
                                 f"hypotheses together): two outputs concatenated?", lines.name, number)
            current[kind] = sample
            found[kind].setdefault(sample, []).append(hyp)
    samples = {**found["H"], **found["D"]}
    return {gold.prompts[s].id: found["D"].get(s) or found["H"][s] for s in samples}


def read_groups(source: Source, gold: Gold) -> Iterator[Group]:
    """Each sample's list as soon as its lines end (fairseq writes a sample's lines together);
    raises :class:`Ungrouped` when a sample comes back after another (H- and D- lines apart)."""
    done = set()
    current, found = None, {"H": [], "D": []}
    with open_input(source) as lines:
        for number, kind, sample, hyp in _hypotheses(lines, gold):
            if sample != current:
                if current is not None:
                    yield gold.prompts[current].id, found["D"] or found["H"]
                    done.add(current)
                if sample in done:
                    raise Ungrouped(gold.prompts[sample].id, lines.name, number)
                current, found = sample, {"H": [], "D": []}
            found[kind].append(hyp)
        if current is not None:
            yield gold.prompts[current].id, found["D"] or found["H"]


def _key(text: str) -> str:
    """Text as S- lines and prompts are compared: STAPLE's key (case, punctuation) after NFKC and
    without HTML entities (Moses escapes) or any whitespace (tokenization)."""
    return "".join(norm(unicodedata.normalize("NFKC", html.unescape(text))).split())


def _source_matches(source: str, prompt: str) -> bool:
    """Whether an S- line's text is ``prompt`` (see :func:`_key`), each ``<unk>`` matching any text.

    A glob match without backtracking: finding each part between ``<unk>`` s leftmost is optimal,
    so a line of many ``<unk>`` costs linear time, not exponential.
    """
    parts = [_key(part) for part in source.split(UNK)]
    text = _key(prompt)
    if len(parts) == 1:
        return text == parts[0]
    first, *middle, last = parts
    if not text.startswith(first):
        return False
    position = len(first)
    for part in middle:
        position = text.find(part, position)
        if position < 0:
            return False
        position += len(part)
    return text.endswith(last) and len(text) - len(last) >= position


def _check_source(source: str, sample: int, gold: Gold, path: str, line: int) -> None:
    prompt = gold.prompts[sample].text
    if _source_matches(source, prompt):
        return
    other = next((i for i, p in enumerate(gold) if UNK not in source and _key(p.text) == _key(source)), None)
    where = f"; it is gold prompt {other}" if other is not None else ""
    raise InputError(f"S-{sample} line {clip(source)} is not gold prompt {sample} {clip(prompt)} (sample i is the "
                     f"gold's i-th prompt, from 0){where}: generate from the gold's prompts in gold order, or order "
                     f"the gold as the generation input (S- lines are compared ignoring case, punctuation and "
                     f"spaces: undo BPE and tokenization with fairseq's --post-process/--tokenizer; delete the "
                     f"S- lines to skip this check)", path, line)
