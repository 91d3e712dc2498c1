"""When each result of an async run arrived (issue 33): one row per hand-off of a run's queue, read
from the sidecar's ``nbest-async/results.jsonl``, with its lag in seconds and in validations. What a
run's summary or a benchmark of ``--nbest-mode async`` reports; the trainer logs the same lags live."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

from ..data import InputError
from .handoff import Queue


@dataclass(frozen=True)
class HandOff:
    """One hand-off: its snapshot's tags, the measures and the prompts scored (None when it was not
    evaluated: ``reason`` says why), the sidecar's timings, and its lag: seconds from hand-off to
    result, and how many later validations had been handed off by then."""

    seq: int
    epoch: Optional[int]
    step: int
    values: Optional[Dict[str, Optional[float]]]
    n_prompts: Optional[int]
    reason: Optional[str]
    timings: Dict[str, float]
    lag_s: Optional[float]
    lag_validations: Optional[int]


def timeline(run_dir: Any) -> List[HandOff]:
    """The hand-offs of the run in ``run_dir`` (its save/output dir or its ``nbest-async``), in order."""
    path = Queue(run_dir).path("results.jsonl")
    try:
        with open(path, encoding="utf-8") as file:
            results = [json.loads(line) for line in file if line.strip()]
    except (OSError, ValueError) as err:
        raise InputError(f"not the results of an async run ({err})", path) from None
    handed = [r["timings"]["handed_off_at"] for r in results if "handed_off_at" in r.get("timings", {})]
    rows = []
    for result in results:
        tags, timings = result.get("tags", {}), result.get("timings", {})
        step = tags.get("update", tags.get("step"))
        if not isinstance(result.get("seq"), int) or not isinstance(step, int):
            raise InputError(f"a result without its seq and step: {json.dumps(result)[:200]}", path)
        start, end = timings.get("handed_off_at"), timings.get("evaluated_at")
        lag = None if start is None or end is None else end - start
        rows.append(HandOff(result["seq"], tags.get("epoch"), step, result.get("values"), result.get("n_prompts"),
                            result.get("skipped") or result.get("not_evaluated"), timings, lag,
                            None if lag is None else meanwhile(start, end, handed)))
    return rows


def meanwhile(start: float, end: float, handed_off: Iterable[float]) -> int:
    """The validations handed off while a result was on its way: hand-off times after ``start`` (its
    own hand-off) and by ``end`` (when the sidecar finished it)."""
    return sum(start < t <= end for t in handed_off)


def lag_summary(rows: List[HandOff]) -> Dict[str, Any]:
    """The lags of the evaluated hand-offs: mean and max seconds, the most validations a result came late."""
    lags = [row.lag_s for row in rows if row.lag_s is not None and row.values is not None]
    late = [row.lag_validations for row in rows if row.lag_validations is not None and row.values is not None]
    return {"evaluated": sum(row.values is not None for row in rows),
            "not_evaluated": sum(row.values is None for row in rows),
            "lag_s_mean": sum(lags) / len(lags) if lags else None, "lag_s_max": max(lags, default=None),
            "lag_validations_max": max(late, default=None)}
