"""summary.json's rows: one per validation from a framework's logged line (or, in async mode, the
sidecar's result with its lag), the in-loop early stopping's outcome, and how each measure ranks the
validations against MAP."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from .settings import METRICS


def validation(line: Dict, *, epoch: int, step: int, nbest: Path, checkpoint: Path) -> Dict:
    """One validation's row of summary.json, from a logged line with the ``eval_``/``valid_`` prefix removed."""
    row = {"epoch": epoch, "step": step, **{k: float(line[k]) for k in METRICS},
           "n_prompts": int(line["nbest_prompts"]), "gen_seconds": float(line["nbest_gen_s"]),
           "score_seconds": float(line["nbest_score_s"]), "overhead_seconds": float(line["nbest_overhead_s"]),
           "nbest": str(nbest), "checkpoint": str(checkpoint)}
    for key in ("loss", "nll_loss", "wall"):
        if key in line:
            row[key] = float(line[key])
    kept = line.get("nbest_kept_update", line.get("nbest_kept_step"))  # with in-loop early stopping
    if kept is not None:
        row["kept_step"] = int(float(kept))
    return row


@dataclass
class TrainingRun:
    """What a framework's run gives summary.json: a row per validation, the training command's wall
    time (with async, the wait for the sidecar at the end included), the epochs trained, and in async
    mode where the sidecar ran and the step its rule kept (the loop logs it in each row)."""

    rows: List[Dict]
    seconds: float
    epochs_trained: int
    sidecar: Optional[str] = None
    kept_step: Optional[int] = None
    lags: Optional[Dict] = None  # async: nbest_eval.training.timeline.lag_summary of the run's hand-offs


def loss_rows(lines: Sequence[Dict], step_key: str) -> List[Dict]:
    """--nbest-mode off: one row per validation, the loss alone."""
    return [{"epoch": round(float(line["epoch"])), "step": int(float(line[step_key])),
             **{key: float(line[key]) for key in ("loss", "nll_loss", "wall") if key in line}} for line in lines]


def async_rows(run_dir: Path, losses: Mapping[int, Dict], epoch_of: Callable[[int], int],
               nbest: Callable[[int, int], Path], checkpoint: Callable[[int, int], Path]) -> List[Dict]:
    """--nbest-mode async: a row per evaluated result of the sidecar, with the trainer's loss at its
    step, and its lag (:func:`nbest_eval.training.timeline.timeline`). Skipped snapshots, and those
    after the stop verdict, have no row."""
    from nbest_eval.training.timeline import timeline

    rows = []
    for arrival in timeline(run_dir):
        if arrival.values is None:
            continue
        step, timings = arrival.step, arrival.timings
        epoch = epoch_of(step)
        line = {**losses.get(step, {}), **{k: 0.0 if v is None else v for k, v in arrival.values.items()},
                "nbest_prompts": arrival.n_prompts,
                **{key: timings.get(key, 0.0) for key in ("nbest_gen_s", "nbest_score_s", "nbest_overhead_s")}}
        row = validation(line, epoch=epoch, step=step, nbest=nbest(epoch, step), checkpoint=checkpoint(epoch, step))
        row.update(lag_seconds=arrival.lag_s, lag_validations=arrival.lag_validations)
        rows.append(row)
    return rows


def async_run(run_dir: Path, rows: List[Dict], seconds: float, epochs_trained: int, sidecar: str) -> TrainingRun:
    """--nbest-mode async: the run with the step the sidecar's rule keeps (its verdict; None without
    one) and the lags of its hand-offs."""
    from nbest_eval.training.timeline import lag_summary, timeline

    path = run_dir / "nbest-async" / "verdict.json"
    kept = json.loads(path.read_text()).get("kept") if path.is_file() else None
    return TrainingRun(rows, seconds, epochs_trained, sidecar, None if kept is None else kept.get("step"),
                       lag_summary(timeline(run_dir)))


def in_loop_stopping(run: TrainingRun, args: argparse.Namespace) -> Optional[Dict]:
    """With --patience: the rule the run trained with, the epoch after which it stopped (None: it
    trained every epoch) and the epoch whose checkpoint it kept, from the logged kept step (async: the
    sidecar's verdict)."""
    rows = run.rows
    if not args.patience or not rows:
        return None
    kept_step = run.kept_step if run.sidecar else rows[-1].get("kept_step")
    kept = next((row["epoch"] for row in rows if row["step"] == kept_step), None)
    return {"rule": args.stopping, "patience": args.patience, "metric": "map",
            "stopped_after": run.epochs_trained if run.epochs_trained < args.epochs else None, "kept": kept}


def timing(run: TrainingRun, mode: str) -> Dict:
    """summary.json's ``timing``: the training command's wall time; the n-best generation and scoring
    summed over the validations, with the scoring that held generation up (overhead); in the loop the
    share of the wall time that generation took, in async mode the lag of each result."""
    found = {"nbest_mode": mode, "training_seconds": round(run.seconds, 1), "epochs_trained": run.epochs_trained,
             "validations": len(run.rows), "sidecar_device": run.sidecar}
    sums = {key: sum(row.get(column, 0.0) for row in run.rows) for key, column in
            (("generation_seconds", "gen_seconds"), ("score_seconds", "score_seconds"),
             ("overhead_seconds", "overhead_seconds"))}
    if mode != "off":
        found.update({key: round(total, 1) for key, total in sums.items()})
    if mode == "loop":
        found["generation_share"] = round(sums["generation_seconds"] / run.seconds, 3)
    if mode == "async":
        lags = run.lags
        found.update(lag_seconds={"mean": round(lags["lag_s_mean"] or 0.0, 1),
                                  "max": round(lags["lag_s_max"] or 0.0, 1)},
                     lag_validations_max=lags["lag_validations_max"] or 0)
    return found


def agreement_with_map(rows: Sequence[Dict]) -> Dict[str, Dict]:
    """How each other measure ranks the validations against MAP's ranking (Spearman, Kendall); the
    loss negated, so that higher is better for all."""
    from nbest_eval.analysis.agreement import agreement

    others = {k: [r[k] for r in rows] for k in METRICS if k != "map"}
    if all("loss" in r for r in rows):
        others["neg_loss"] = [-r["loss"] for r in rows]
    return {key: agreement([r["map"] for r in rows], ys, ["spearman", "kendall"]) for key, ys in others.items()}
