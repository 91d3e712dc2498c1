"""Tab-separated n-best lists: ``prompt_id<TAB>rank<TAB>score<TAB>hypothesis``, one hypothesis a line.

Ranks are 1-based and lines may come in any order (they are sorted by rank per prompt). An empty
score field means no score. The optional header line :data:`HEADER` is skipped; the writer emits it.
"""

from __future__ import annotations

import os
from typing import Dict, Hashable, List, Optional

from ..data import Gold, Hyp, InputError, NBest
from .common import PathLike, check_field, check_known, first_time, join_lines, parse_score, read_lines

HEADER = "prompt_id\trank\tscore\thypothesis"


def _rank(text: str, path: str, line: int) -> int:
    try:
        rank = int(text)
    except ValueError:
        rank = 0
    if rank < 1:
        raise InputError(f"rank {text!r} is not an integer >= 1", path, line)
    return rank


def read_nbest(path: PathLike, gold: Gold) -> NBest:
    name = os.fspath(path)
    ranked: Dict[str, Dict[int, Hyp]] = {}
    seen: Dict[Hashable, int] = {}
    for number, line in read_lines(path):
        if line == HEADER or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise InputError(f"expected 4 tab-separated fields 'prompt_id, rank, score, hypothesis', "
                             f"got {len(fields)}", name, number)
        prompt_id, rank_text, score_text, text = fields
        check_known(gold, prompt_id, name, number)
        rank = _rank(rank_text, name, number)
        first_time(seen, (prompt_id, rank), f"rank {rank} for prompt {prompt_id!r}", name, number)
        score = None if score_text == "" else parse_score(score_text, name, number)
        ranked.setdefault(prompt_id, {})[rank] = Hyp(text, score)
    return {prompt_id: [hyps[r] for r in sorted(hyps)] for prompt_id, hyps in ranked.items()}


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    lines: List[str] = [HEADER]
    for prompt_id, hyps in nbest.items():
        check_field(prompt_id, "\t\n\r", "prompt id", "TSV", path)
        for rank, hyp in enumerate(hyps, 1):
            check_field(hyp.text, "\t\n\r", "hypothesis", "TSV", path)
            score = "" if hyp.score is None else repr(float(hyp.score))
            lines.append(f"{prompt_id}\t{rank}\t{score}\t{hyp.text}")
    return join_lines(lines)
