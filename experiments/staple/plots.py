"""The run's plots: each measure per epoch with its 95% interval as a band."""

from __future__ import annotations

from pathlib import Path
from typing import Dict


def plot(selection: Dict, out: Path, title: str, overwrite: bool = False) -> None:
    """``map.png``, ``curves.png`` (wF1, P@1), ``bleu-curves.png`` and ``loss.png`` per epoch (MAP
    alone: its scale is a tenth of the others'): each measure's 95% interval as a band, the epochs
    tied with its best circled."""
    from nbest_eval.analysis import plots

    rows = selection["validations"]
    epochs = [r["epoch"] for r in rows]
    for name, keys, ylabel in (("map.png", ("map",), "MAP"), ("curves.png", ("wf1", "p1"), "value"),
                               ("bleu-curves.png", ("bleu_1x1", "bleu_100x100"), "BLEU"),
                               ("loss.png", ("loss",), "validation loss")):
        judged = [k for k in keys if all(r.get("ci", {}).get(k) for r in rows)]
        plots.line_plot(epochs, {k: [r.get(k) for r in rows] for k in keys}, out / name, xlabel="epoch",
                        ylabel=ylabel, overwrite=overwrite,
                        title=title + ("\n(band: 95% CI; circled: tied with the best)" if judged else ""),
                        bands={k: ([r["ci"][k]["low"] for r in rows], [r["ci"][k]["high"] for r in rows])
                               for k in judged},
                        rings={k: [r["ci"][k]["tied"] for r in rows] for k in judged})
