"""The text tables of a run: its validations beside the baseline, and selection.txt."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from .settings import METRICS


def table(rows: Sequence[Dict], baseline: Optional[Dict] = None) -> str:
    keys = [*METRICS, "loss"]
    lines = ["epoch  " + "  ".join(f"{k:>12}" for k in keys) + "   gen_s  score_s"]
    lines += [f"{r['epoch']:>5}  " + "  ".join(_cell(r.get(k)) for k in keys)
              + f"  {r['gen_seconds']:6.2f}  {r['score_seconds']:6.2f}" for r in rows]
    if baseline:
        lines.append("  AWS  " + "  ".join(_cell(baseline.get(k)) for k in keys))
    return "\n".join(lines)


def selection_table(selection: Dict) -> str:
    """Per measure: its peak and each patience's stop and pick, every pick scored by all measures;
    the epochs tied with each peak; the averages against the best single checkpoint."""
    keys = [*METRICS, "loss"]
    lines = ["picked by     how                  epoch  " + "  ".join(f"{k:>12}" for k in keys)]
    for key, result in selection["measures"].items():
        choices = [("peak", result["peak"])]
        for p, replay in result["patience"].items():
            stop = replay["stopped_at_epoch"]
            choices.append((f"patience {p}, " + (f"stop {stop}" if stop is not None else "no stop"), replay["keeps"]))
        for how, chosen in choices:
            cells = "  ".join(_cell(chosen["values"].get(k)) for k in keys)
            lines.append(f"{key:<13} {how:<20} {chosen['epoch']:>5}  {cells}")
    test = selection["significance"]
    lines += ["", f"tied with each measure's peak ({test['test']}, {test['n_samples']} resamples, p >= "
                  f"{test['alpha']}), and which measures' tied sets hold each peak:"]
    for key, result in selection["measures"].items():
        tied = _epochs(result["tied_epochs"]) if result["tied_epochs"] is not None else "n/a (no per-prompt loss)"
        lines.append(f"{key:<13} peak {result['peak']['epoch']:>3}: tied {tied}; "
                     f"as good as the best by: {', '.join(result['peak']['tied_with_the_best_by']) or 'none'}")
    if selection.get("stopping"):
        lines += ["", "early stopping on MAP replayed (each rule as training decides; p: against the measure's best)",
                  "rule          P  stops after  keeps  saved   MAP [95% CI]                 p     "
                  "BLEU 100x100 [95% CI]       p"]
        for r in selection["stopping"]:
            stop = r["stopped_after_epoch"]
            cells = "  ".join(f"{_with_ci(r[k])}  {r[k]['p_vs_best']:.3f}" for k in ("map", "bleu_100x100"))
            lines.append(f"{r['rule']:<12} {r['patience']:>2}  {'never' if stop is None else stop:>11}  "
                         f"{r['kept_epoch']:>5}  {r['epochs_saved']:>4.0%}   {cells}")
    if "averages" in selection:
        lines += ["", "averaged checkpoints (paired bootstrap p-value against the best single checkpoint by map)",
                  "system             epochs          " + "  ".join(f"{k:>18}" for k in METRICS)]
        for name, result in selection["averages"].items():
            epochs = _epochs(result.get("epochs", [result.get("epoch")]))
            p = result.get("p_vs_best_single", {})
            cells = "  ".join(f"{result['values'][k]:10.4f}" + (f" p={p[k]:.3f}" if k in p else " " * 8)
                              for k in METRICS)
            lines.append(f"{name:<18} {epochs:<15} {cells}")
    return "\n".join(lines)


def _epochs(epochs: Sequence[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    runs: List[List[int]] = []
    for epoch in sorted(epochs):
        if runs and epoch == runs[-1][-1] + 1:
            runs[-1].append(epoch)
        else:
            runs.append([epoch])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


def _with_ci(entry: Dict) -> str:
    ci = entry["ci"]
    return f"{entry['value']:8.4f} [{ci['low']:.4f}, {ci['high']:.4f}]" if ci else f"{entry['value']:8.4f}" + " " * 18


def _cell(value: Optional[float]) -> str:
    return f"{'n/a':>12}" if value is None else f"{value:12.4f}"
