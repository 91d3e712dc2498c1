"""summary.json's rows: one per validation from a framework's logged line, the in-loop early
stopping's outcome, and how each measure ranks the validations against MAP."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Optional, Sequence

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


def in_loop_stopping(rows: Sequence[Dict], args: argparse.Namespace) -> Optional[Dict]:
    """With --patience: the rule the run trained with, the epoch after which it stopped (None: it
    trained every epoch) and the epoch whose checkpoint it kept, from the logged kept step."""
    if not args.patience or not rows:
        return None
    kept = next((row["epoch"] for row in rows if row["step"] == rows[-1].get("kept_step")), None)
    return {"rule": args.stopping, "patience": args.patience, "metric": "map",
            "stopped_after": rows[-1]["epoch"] if len(rows) < args.epochs else None, "kept": kept}


def agreement_with_map(rows: Sequence[Dict]) -> Dict[str, Dict]:
    """How each other measure ranks the validations against MAP's ranking (Spearman, Kendall); the
    loss negated, so that higher is better for all."""
    from nbest_eval.analysis.agreement import agreement

    others = {k: [r[k] for r in rows] for k in METRICS if k != "map"}
    if all("loss" in r for r in rows):
        others["neg_loss"] = [-r["loss"] for r in rows]
    return {key: agreement([r["map"] for r in rows], ys, ["spearman", "kendall"]) for key, ys in others.items()}
