"""JSON lines n-best lists: ``{"id": ..., "hyps": [...], "scores": [...]}``, one prompt a line.

``scores`` is optional; when present it has one number (or null) per hypothesis. Other keys are
ignored. Being JSON, this format holds any text, including tabs, newlines and empty hypotheses.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional

from ..data import Gold, Hyp, InputError, NBest
from .common import PathLike, check_known, first_time, join_lines, read_lines

_SHAPE = 'expected {"id": "...", "hyps": ["...", ...], "scores": [number or null, ...]} (scores optional)'


def _is_score(value: Any) -> bool:
    """null, or a number that is a float other than nan (a huge JSON integer would overflow)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return not math.isnan(float(value))
    except OverflowError:
        return False


def _hyps(record: Any, path: str, line: int) -> List[Hyp]:
    """The hypotheses of one parsed line, after checking its shape."""
    def fail(problem: str) -> InputError:
        return InputError(f"{problem}; {_SHAPE}", path, line)

    if not isinstance(record, dict):
        raise fail(f"a JSON {type(record).__name__} instead of an object")
    for key in ("id", "hyps"):
        if key not in record:
            raise fail(f"missing key {key!r}")
    if not isinstance(record["id"], str):
        raise fail(f"'id' must be a string, got {type(record['id']).__name__}")
    texts = record["hyps"]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise fail("'hyps' is not a list of strings")
    scores = record.get("scores")
    if scores is None:  # absent or null: no model scores
        scores = [None] * len(texts)
    if not isinstance(scores, list) or not all(_is_score(s) for s in scores):
        raise fail("'scores' is not a list of numbers or nulls")
    if len(scores) != len(texts):
        raise fail(f"'scores' has {len(scores)} entries but 'hyps' has {len(texts)}")
    return [Hyp(t, None if s is None else float(s)) for t, s in zip(texts, scores)]


def read_nbest(path: PathLike, gold: Gold) -> NBest:
    name = os.fspath(path)
    nbest: NBest = {}
    seen: Dict[str, int] = {}
    for number, line in read_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"invalid JSON: {err.msg} at column {err.colno}", name, number) from None
        hyps = _hyps(record, name, number)
        prompt_id = record["id"]
        check_known(gold, prompt_id, name, number)
        first_time(seen, prompt_id, f"prompt id {prompt_id!r}", name, number)
        nbest[prompt_id] = hyps
    return nbest


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    """``scores`` is written only for lists that have at least one score."""
    lines = []
    for prompt_id, hyps in nbest.items():
        record: Dict[str, Any] = {"id": prompt_id, "hyps": [h.text for h in hyps]}
        if any(h.score is not None for h in hyps):
            record["scores"] = [None if h.score is None else float(h.score) for h in hyps]
        lines.append(json.dumps(record, ensure_ascii=False))
    return join_lines(lines)
