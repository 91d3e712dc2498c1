"""Tab-separated n-best lists: ``prompt_id<TAB>rank<TAB>score<TAB>hypothesis``, one hypothesis a line.

Ranks are ASCII digits, 1-based, and lines may come in any order (they are sorted by rank per
prompt). Each prompt's ranks must be 1, 2, ..., n: a gap (1, 5, 100) means lines are missing, so it
is an error unless ``allow_rank_gaps`` (``--allow-rank-gaps``), where only the order of the ranks
counts. An empty score field means no score. The optional header line :data:`HEADER` is skipped; the
writer emits it.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

from ..data import Gold, Hyp, InputError, NBest
from .common import (
    Group,
    LineSource,
    Source,
    Ungrouped,
    check_field,
    check_known,
    check_score,
    clip,
    first_time,
    join_lines,
    no_carriage_return,
    open_input,
    parse_digits,
    parse_score,
)

HEADER = "prompt_id\trank\tscore\thypothesis"


def _rank(text: str, path: str, line: int) -> int:
    rank = parse_digits(text)
    if rank is None or rank < 1:
        raise InputError(f"rank {clip(text)} is not an integer >= 1 (ASCII digits only)", path, line)
    return rank


def _check_no_gaps(ranked: Dict[str, Dict[int, int]], path: str) -> None:
    """Every prompt's ranks are 1..n; the first rank after a gap is reported at its line."""
    for prompt_id, lines in ranked.items():
        for expected, rank in enumerate(sorted(lines), 1):
            if rank != expected:
                raise InputError(f"prompt {clip(prompt_id)} has rank {rank} but no rank {expected}: ranks must be "
                                 f"1, 2, 3, ... (use --allow-rank-gaps to order by rank instead)", path, lines[rank])


def _rows(lines: LineSource, gold: Gold) -> Iterator[Tuple[int, str, int, Hyp]]:
    """(line number, prompt id, rank, hypothesis) of every data line."""
    name = lines.name
    for number, line in lines:
        if line == HEADER or not line.strip():
            continue
        no_carriage_return(line, name, number)
        fields = line.split("\t")
        if len(fields) != 4:
            raise InputError(f"expected 4 tab-separated fields 'prompt_id, rank, score, hypothesis', "
                             f"got {len(fields)}", name, number)
        prompt_id, rank_text, score_text, text = fields
        check_known(gold, prompt_id, name, number)
        rank = _rank(rank_text, name, number)
        score = None if score_text == "" else parse_score(score_text, name, number)
        yield number, prompt_id, rank, Hyp(text, score)


def _ordered(ranked: Dict[str, Dict[int, Hyp]], lines_of: Dict[str, Dict[int, int]], path: str,
             allow_rank_gaps: bool) -> NBest:
    if not allow_rank_gaps:
        _check_no_gaps(lines_of, path)
    return {prompt_id: [hyps[r] for r in sorted(hyps)] for prompt_id, hyps in ranked.items()}


def read_nbest(source: Source, gold: Gold, allow_rank_gaps: bool = False) -> NBest:
    """Every prompt's list, the lines in any order."""
    hyps: Dict[str, Dict[int, Hyp]] = {}
    lines_of: Dict[str, Dict[int, int]] = {}  # prompt -> rank -> line, for duplicates and gaps
    with open_input(source) as lines:
        for number, prompt_id, rank, hyp in _rows(lines, gold):
            first_time(lines_of.setdefault(prompt_id, {}), rank, f"rank {rank} for prompt {clip(prompt_id)}",
                       lines.name, number)
            hyps.setdefault(prompt_id, {})[rank] = hyp
    return _ordered(hyps, lines_of, lines.name, allow_rank_gaps)


def read_groups(source: Source, gold: Gold, allow_rank_gaps: bool = False) -> Iterator[Group]:
    """Each prompt's list as soon as its lines end, for files whose lines are grouped by prompt (as
    the writer writes them); raises :class:`Ungrouped` when a prompt comes back after another, or
    ends with a gap in its ranks that later lines might fill."""
    done = set()
    current: Optional[str] = None
    hyps: Dict[int, Hyp] = {}
    lines_of: Dict[int, int] = {}

    def finished() -> Group:
        if not allow_rank_gaps and sorted(hyps) != list(range(1, len(hyps) + 1)):
            raise Ungrouped(current, lines.name, min(lines_of.values()), "has gaps in its ranks")
        done.add(current)
        return current, [hyps[r] for r in sorted(hyps)]

    with open_input(source) as lines:
        for number, prompt_id, rank, hyp in _rows(lines, gold):
            if prompt_id != current:
                if current is not None:
                    yield finished()
                if prompt_id in done:
                    raise Ungrouped(prompt_id, lines.name, number)
                current, hyps, lines_of = prompt_id, {}, {}
            first_time(lines_of, rank, f"rank {rank} for prompt {clip(prompt_id)}", lines.name, number)
            hyps[rank] = hyp
        if current is not None:
            yield finished()


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    lines: List[str] = [HEADER]
    for prompt_id, hyps in nbest.items():
        check_field(prompt_id, "\t\n\r", "prompt id", "TSV", path)
        for rank, hyp in enumerate(hyps, 1):
            check_field(hyp.text, "\t\n\r", "hypothesis", "TSV", path)
            check_score(hyp.score, prompt_id, rank, "TSV", path)
            score = "" if hyp.score is None else repr(float(hyp.score))
            lines.append(f"{prompt_id}\t{rank}\t{score}\t{hyp.text}")
    return join_lines(lines)
