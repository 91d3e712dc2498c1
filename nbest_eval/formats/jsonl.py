"""JSON lines n-best lists: ``{"id": ..., "hyps": [...], "scores": [...]}``, one prompt a line.

``scores`` is optional; when present it has one number (or null) per hypothesis. Other keys are
ignored. Being JSON, this format holds any text, including tabs, newlines and empty hypotheses.

JSON has no infinity or nan: the writer emits strict JSON and refuses a score it cannot hold (-inf,
a valid log-probability, is kept by tsv), rather than change it. The reader also takes the
``-Infinity`` that Python's json module (and so older versions of this writer) writes; nan and
+inf are no log-probability and are refused.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Iterator, List, Optional

from ..data import Gold, Hyp, InputError, NBest
from .common import Group, Source, check_known, check_score, clip, first_time, join_lines, json_text, open_input

_SHAPE = 'expected {"id": "...", "hyps": ["...", ...], "scores": [number or null, ...]} (scores optional)'


def _is_score(value: Any) -> bool:
    """null, or a number that is a float other than nan and +inf (a huge JSON integer would overflow)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        value = float(value)
    except OverflowError:
        return False
    return not math.isnan(value) and value != math.inf


def _is_text(value: str) -> bool:
    """A string that is text: JSON escapes can make lone surrogates (``\\ud800``), which no file can hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    if not _is_text(record["id"]):
        raise fail("'id' holds a lone surrogate escape (like \\ud800), which is not text")
    texts = record["hyps"]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise fail("'hyps' is not a list of strings")
    if not all(_is_text(t) for t in texts):
        raise fail("'hyps' holds a lone surrogate escape (like \\ud800), which is not text")
    scores = record.get("scores")
    if scores is None:  # absent or null: no model scores
        scores = [None] * len(texts)
    if not isinstance(scores, list) or not all(_is_score(s) for s in scores):
        raise fail("'scores' is not a list of numbers or nulls (nan and +inf are no log-probability)")
    if len(scores) != len(texts):
        raise fail(f"'scores' has {len(scores)} entries but 'hyps' has {len(texts)}")
    return [Hyp(t, None if s is None else float(s)) for t, s in zip(texts, scores)]


def _parse(line: str, path: str, number: int) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON: {err.msg} at column {err.colno}", path, number) from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise InputError(f"invalid JSON: {err}", path, number) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply", path, number) from None


def read_groups(source: Source, gold: Gold) -> Iterator[Group]:
    """Each line's (prompt id, hypotheses), as they are read."""
    seen: Dict[str, int] = {}
    with open_input(source) as lines:
        name = lines.name
        for number, line in lines:
            if not line.strip():
                continue
            record = _parse(line, name, number)
            hyps = _hyps(record, name, number)
            prompt_id = record["id"]
            check_known(gold, prompt_id, name, number)
            first_time(seen, prompt_id, f"prompt id {clip(prompt_id)}", name, number)
            yield prompt_id, hyps


def read_nbest(source: Source, gold: Gold) -> NBest:
    return dict(read_groups(source, gold))


def format_nbest(nbest: NBest, gold: Optional[Gold], path: str) -> str:
    """``scores`` is written only for lists that have at least one score."""
    lines = []
    for prompt_id, hyps in nbest.items():
        record: Dict[str, Any] = {"id": prompt_id, "hyps": [h.text for h in hyps]}
        if any(h.score is not None for h in hyps):
            for rank, hyp in enumerate(hyps, 1):
                check_score(hyp.score, prompt_id, rank, "JSON", path, holds_minus_inf=False)
            record["scores"] = [None if h.score is None else float(h.score) for h in hyps]
        lines.append(json_text(record))
    return join_lines(lines)
