"""PNG figures for the analysis commands: heatmaps, a scatter with its linear fit, line plots, and
the bars of a precision histogram.

Figures are drawn on matplotlib's Agg canvas directly, without pyplot, so importing this module
changes no global backend and works on machines without a display. Every writer refuses to
replace an existing file unless ``overwrite``, and writes through :mod:`nbest_eval.files.output` (all or
nothing: a figure is rendered beside its target, then renamed into place).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..data import InputError
from ..files.output import PathLike, write_file


def save(fig: Figure, path: PathLike, overwrite: bool = False) -> None:
    FigureCanvasAgg(fig)
    write_file(path, lambda partial: fig.savefig(partial, format="png", dpi=120, bbox_inches="tight"), overwrite)


def _grid(values: Sequence[Sequence[Optional[float]]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)


def heatmap(values: Sequence[Sequence[Optional[float]]], rows: Sequence[str], columns: Sequence[str],
            path: PathLike, *, title: str, xlabel: str = "", ylabel: str = "", label: str = "",
            overwrite: bool = False) -> None:
    """An annotated heatmap on a fixed [-1, 1] colour scale (correlations); None cells stay blank."""
    grid = _grid(values)
    fig = Figure(figsize=(1.6 + 0.75 * len(columns), 1.2 + 0.5 * len(rows)))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(columns)), labels=columns, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), labels=rows)
    for (r, c), v in np.ndenumerate(grid):
        if not np.isnan(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if abs(v) > 0.6 else "black")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.colorbar(image, ax=ax, label=label)
    save(fig, path, overwrite)


def fit_line(x: Sequence[float], y: Sequence[float]) -> Tuple[float, float, float]:
    """Least-squares (slope, intercept, r^2); an :class:`InputError` unless each has 2 distinct values."""
    if len(set(x)) < 2 or len(set(y)) < 2:
        raise InputError("a linear fit needs at least 2 distinct values of each measure")
    slope, intercept = np.polyfit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), 1)
    return float(slope), float(intercept), float(np.corrcoef(x, y)[0, 1] ** 2)


def scatter_fit(x: Sequence[float], y: Sequence[float], names: Sequence[str], path: PathLike, *,
                xlabel: str, ylabel: str, overwrite: bool = False) -> float:
    """Systems as labelled points with the least-squares line; returns r^2 (shown in the title)."""
    slope, intercept, r_squared = fit_line(x, y)
    fig = Figure(figsize=(5, 4))
    ax = fig.add_subplot()
    ax.scatter(x, y)
    for name, a, b in zip(names, x, y):
        ax.annotate(name, (a, b), textcoords="offset points", xytext=(3, 3), fontsize=7)
    line = np.array([min(x), max(x)])
    ax.plot(line, slope * line + intercept, color="C1", label=f"y = {slope:.3g} x + {intercept:.3g}")
    ax.set(title=f"{ylabel} vs {xlabel} (r\u00b2 = {r_squared:.3f})", xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=8)
    save(fig, path, overwrite)
    return r_squared


def line_plot(x: Sequence[float], series: Dict[str, List[Optional[float]]], path: PathLike, *,
              title: str, xlabel: str, ylabel: str, overwrite: bool = False,
              bands: Optional[Dict[str, Tuple[Sequence[Optional[float]], Sequence[Optional[float]]]]] = None,
              rings: Optional[Dict[str, Sequence[bool]]] = None) -> None:
    """One marked line per series (None points are gaps); ``bands``: a series' (low, high) interval
    at each point, shaded; ``rings``: points of a series to circle (e.g. tied with its best)."""
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for label, ys in series.items():
        line, = ax.plot(x, _grid([ys])[0], marker="o", label=label)
        if bands and label in bands:
            low, high = _grid(bands[label])
            ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        if rings and label in rings:
            ringed = [(a, b) for a, b, ring in zip(x, ys, rings[label]) if ring and b is not None]
            if ringed:
                ax.scatter(*zip(*ringed), s=140, facecolors="none", edgecolors=line.get_color(), linewidths=1.5)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path, overwrite)


def difference_bars(values: Sequence[float], path: PathLike, *, title: str, xlabel: str, ylabel: str,
                    above: str, below: str, overwrite: bool = False) -> None:
    """One bar per item in the given order, from 0 up (``above``'s colour and legend) or down
    (``below``'s): a precision histogram, where the sign says which of two systems wins."""
    fig = Figure(figsize=(min(12.0, 4 + 0.04 * len(values)), 4))
    ax = fig.add_subplot()
    ax.bar(range(len(values)), values, width=0.9 if len(values) < 60 else 1.0,
           color=["C0" if v > 0 else "C3" for v in values])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel, xticks=[], ylim=(-1.05, 1.05))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=[Patch(color="C0", label=above), Patch(color="C3", label=below)], fontsize=8)  # both signs
    save(fig, path, overwrite)
