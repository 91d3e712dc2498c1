"""Moses n-best lists, as Moses, Marian (``--n-best``) and other toolkits write them.

One hypothesis a line: ``N ||| hypothesis ||| feature scores ||| total score``, fields separated by
``|||``; the feature field may be empty and is not read, and fields after the total score (Moses's
segmentation or word alignment) are ignored. Sentence ``N`` is the gold's N-th prompt, from 0 (as
for fairseq: translate the gold's prompts in file order), and a sentence's lines are its list in
rank order. Moses and Marian write a sentence's lines together, so a sentence that comes back after
others is an error (two outputs concatenated?).

Spaces around ``|||`` are padding: the sentence id and the score may have any, and a hypothesis loses
one on each side (Moses ends every word with a space), so any text without ``|||`` or a line break
reads back as the writer wrote it.

Scores: the total score as given, which both toolkits compute from natural logs: Marian's is the
hypothesis' log-probability (length-normalized with ``--normalize``), Moses's its log-linear model
score (the weighted sum of its log features), which options that read scores as log-probabilities
(``--wf1-threshold``) take as one. Marian run with ``--alignment`` puts the alignment third and the
total fifth: such lines are refused, with that hint.

Sentence ids from 1 would silently score every list against the prompt after its own, so a file
that looks 1-based is refused (:func:`check_zero_based`): its first sentence is 1, no sentence 0 is
among its first lines, and those lines' hypotheses share at least twice as many words with the gold
translations of the prompt before their sentence as with their own prompt's. A 0-based file that just
lacks sentence 0 (an empty list) reads best unshifted, so it is read as it is. The words are the only
evidence: a 1-based file of near-garbage hypotheses (an early checkpoint's) shares few words with
either prompt, so it is not recognized; if it has the last sentence, that id is out of range and the
error suggests the ids may count from 1; if it lacks the last sentence it is read one prompt off,
undetected. Number sentence ids from 0 (or write tsv or jsonl, which name the prompt).

The writer writes Marian's layout with the total score as the only feature, ``N ||| hypothesis |||
F0= SCORE ||| SCORE``, which Moses's tools read too; every hypothesis needs a score.
"""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ..data import Gold, Hyp, InputError, NBest
from ..prompt import norm
from .common import (
    Group,
    LineSource,
    Source,
    check_field,
    check_known,
    check_score,
    clip,
    first_time,
    gold_position,
    join_lines,
    no_carriage_return,
    open_input,
    parse_digits,
    parse_score,
)

SEPARATOR = "|||"
LAYOUT = "'N ||| hypothesis ||| feature scores ||| total score'"
#: the first lines that :func:`check_zero_based` weighs (the format detection peeks as far)
SAMPLE_LINES = 200
#: how to fix a file whose sentence ids count from 1
RENUMBER = "renumber the ids from 0, e.g. perl -pe 's/^(\\s*)(\\d+)/$1.($2-1)/e' IN > OUT"
#: what an id one past the gold's last prompt suggests
PAST_END = (": if the file numbers its sentences from 1 (not recognized from its first lines when their hypotheses "
            "share few words with the gold's translations), " + RENUMBER)


def _unpad(field: str) -> str:
    """A hypothesis field without the space of padding that each separator has on its side."""
    field = field[1:] if field.startswith(" ") else field
    return field[:-1] if field.endswith(" ") else field


def _total(fields: List[str], path: str, line: int) -> float:
    text = fields[3].strip(" ")
    if "=" in text and len(fields) > 4:
        raise InputError(f"the 4th field {clip(text)} holds feature scores, not the total score: Marian run with "
                         f"--alignment writes the alignment as a 3rd field; drop it (the layout is {LAYOUT})",
                         path, line)
    return parse_score(text, path, line)


def _rows(lines: LineSource, gold: Gold) -> Iterator[Tuple[int, int, Hyp]]:
    """(line number, sentence, hypothesis) of every non-blank line."""
    name = lines.name
    for number, line in lines:
        if not line.strip():
            continue
        no_carriage_return(line, name, number)
        fields = line.split(SEPARATOR)
        if len(fields) < 4:
            raise InputError(f"expected {LAYOUT}, got {len(fields)} field(s) separated by '|||'", name, number)
        sentence = gold_position(gold, fields[0].strip(" "), "sentence id", name, number, PAST_END)
        yield number, sentence, Hyp(_unpad(fields[1]), _total(fields, name, number))


def _sampled(lines: LineSource, gold: Gold) -> List[Tuple[int, int, str]]:
    """(line number, sentence, hypothesis) of the well-formed lines among the first :data:`SAMPLE_LINES`, peeked
    (the reader checks every line when it reaches it)."""
    rows = []
    for number, text in lines.peek(SAMPLE_LINES):
        fields = text.split(SEPARATOR)
        sentence = parse_digits(fields[0].strip(" ")) if len(fields) >= 4 else None
        if sentence is not None and sentence < len(gold):
            rows.append((number, sentence, _unpad(fields[1])))
    return rows


def _vocabulary(gold: Gold, sentence: int) -> Set[str]:
    return {word for text, _ in gold.prompts[sentence].translations for word in norm(text).split()}


def check_zero_based(lines: LineSource, gold: Gold) -> None:
    """Refuse a file whose sentence ids look 1-based (see the module's docstring): decided on the
    first lines, before any list is read, whether the lines are then read whole or by shards."""
    rows = _sampled(lines, gold)
    if not rows or rows[0][1] != 1 or any(sentence == 0 for _, sentence, _ in rows):
        return
    sentences = {s for _, sentence, _ in rows for s in (sentence - 1, sentence)}
    vocabulary = {s: _vocabulary(gold, s) for s in sentences}
    own = shifted = 0
    for _, sentence, hypothesis in rows:
        words = set(norm(hypothesis).split())
        here, before = vocabulary[sentence], vocabulary[sentence - 1]
        own += len(words & (here - before))
        shifted += len(words & (before - here))
    if shifted > 2 * own:
        raise InputError(f"the sentence ids look 1-based: the first is 1, none of the first {len(rows)} lines is "
                         f"sentence 0, and their hypotheses share {shifted} words with the gold translations of the "
                         f"prompt before their sentence against {own} with their own. Sentence N is the gold's N-th "
                         f"prompt counted from 0: {RENUMBER}", lines.name, rows[0][0])


def read_groups(source: Source, gold: Gold) -> Iterator[Group]:
    """Each sentence's list as soon as its lines end. A sentence that comes back after others is an
    error, not a reason to read the file whole: which of its lines would rank first is unknown."""
    starts: Dict[int, int] = {}  # sentence -> its first line
    with open_input(source) as lines:
        if lines.whole:  # a worker's part: checked on the file's first lines before the parts are read
            check_zero_based(lines, gold)
        for sentence, run in groupby(_rows(lines, gold), key=itemgetter(1)):
            rows = list(run)
            first_time(starts, sentence, f"sentence {sentence} after other sentences' lines (two outputs "
                                         f"concatenated?)", lines.name, rows[0][0])
            yield gold.prompts[sentence].id, [hyp for _, _, hyp in rows]


def read_nbest(source: Source, gold: Gold) -> NBest:
    return dict(read_groups(source, gold))


def _line(sentence: int, prompt_id: str, rank: int, hyp: Hyp, path: str) -> str:
    check_field(hyp.text, (SEPARATOR, "\n", "\r"), "hypothesis", "Moses", path)
    if hyp.score is None:
        raise InputError(f"prompt {clip(prompt_id)}, rank {rank} has no score, which a Moses n-best line must have; "
                         f"write tsv, jsonl or staple", path)
    check_score(hyp.score, prompt_id, rank, "Moses", path)
    score = repr(float(hyp.score))
    return f"{sentence} ||| {hyp.text} ||| F0= {score} ||| {score}"


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    """Needs the gold for the sentence numbers (a prompt's position in it)."""
    if gold is None:
        raise InputError("writing a Moses n-best file needs the gold (sentence N is its N-th prompt)", path)
    sentences = {prompt_id: n for n, prompt_id in enumerate(gold.ids())}
    lines: List[str] = []
    for prompt_id, hyps in nbest.items():
        check_known(gold, prompt_id, path, None)
        lines.extend(_line(sentences[prompt_id], prompt_id, rank, hyp, path) for rank, hyp in enumerate(hyps, 1))
    return join_lines(lines)
