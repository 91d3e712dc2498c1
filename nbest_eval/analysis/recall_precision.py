"""The recall-precision pictures of IR textbooks (Baeza-Yates and Ribeiro-Neto, ch. 3) for ``compare``.

- The mean interpolated recall-precision curve of a system: at each of the 11 standard recall levels
  0.0, 0.1, ..., 1.0, its ``iprec{r}``, the interpolated precision averaged over the prompts with valid
  translations (``--iprec-rule`` turns a level into a count; docs/metrics.md). One curve per system
  compares them over the whole recall range, where MAP gives one number.
- The precision histogram of two systems: per prompt, system A's R-precision minus system B's, one
  bar per prompt sorted by the difference, so that it shows on how many prompts, and by how much,
  each system wins, which a mean difference hides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from ..data import InputError
from ..metrics.ir_curves import TENTHS
from ..significance import PerPrompt
from ..wording import counted
from .systems import SystemTable
from .text import format_value

#: the 11 standard recall levels and the measures that give a system's curve at them
LEVELS: List[float] = [t / 10 for t in TENTHS]
IPREC_KEYS: List[str] = [f"iprec{level:.1f}" for level in LEVELS]
#: the measure of the precision histogram: precision at rank R, as the textbook draws it
HISTOGRAM_MEASURE = "rprec"


def mean_curves(table: SystemTable) -> Dict[str, List[Optional[float]]]:
    """Each system's mean interpolated precision at the 11 levels (None where undefined: no prompt
    with valid translations); a table without those measures is an error naming the first missing."""
    missing = [key for key in IPREC_KEYS if key not in table.keys]
    if missing:
        raise InputError(f"--pr-curve: the systems table has no {missing[0]} (score it with --metrics "
                         f"{','.join(IPREC_KEYS)})", table.source)
    columns = [table.column(key) for key in IPREC_KEYS]
    return {name: [column[i] for column in columns] for i, name in enumerate(table.names)}


@dataclass
class Curves:
    """Systems' mean interpolated recall-precision curves (:func:`mean_curves`) and the figure they
    are drawn to: ``compare --pr-curve``'s and ``select --pr-curve``'s part of the result."""

    systems: Dict[str, List[Optional[float]]]
    path: Optional[str] = None

    def as_dict(self) -> Dict:
        return {"levels": LEVELS, "systems": self.systems, "path": self.path}

    def text(self) -> List[str]:
        """A row per system of its points, under the recall levels."""
        width = max(len(name) for name in self.systems)
        return ["", f"mean interpolated precision at each recall level -> {self.path}",
                f"{'recall':<{width}}" + "".join(f"{level:>8.1f}" for level in LEVELS),
                *(f"{name:<{width}}" + "".join(f"{format_value(v):>8}" for v in points)
                  for name, points in self.systems.items())]


def eleven_point(curve: List[Optional[float]]) -> Optional[float]:
    """The mean of a curve's 11 points (the 11-point average precision), None if one is undefined."""
    return None if None in curve else sum(curve) / len(curve)


@dataclass
class Histogram:
    """Per prompt, ``system``'s value of ``measure`` minus ``baseline``'s, largest difference first
    (prompts with equal differences in gold order), over the prompts where the measure is defined."""

    measure: str
    system: str
    baseline: str
    prompts: List[str]
    differences: List[float]
    #: the figure it is drawn to
    path: Optional[str] = None

    def as_dict(self) -> Dict:
        """The bars, and on how many prompts each system wins (the sign of the difference)."""
        return {"measure": self.measure, "system": self.system, "baseline": self.baseline,
                "prompts": self.prompts, "differences": self.differences,
                "system_better": sum(d > 0 for d in self.differences),
                "baseline_better": sum(d < 0 for d in self.differences),
                "equal": sum(d == 0 for d in self.differences), "path": self.path}

    def text(self) -> List[str]:
        """Who wins on how many prompts."""
        bars = self.as_dict()
        return ["", f"{self.measure} per prompt, {self.system} minus {self.baseline}, over {len(self.differences)} "
                    f"prompts: {self.system} better on {bars['system_better']}, {self.baseline} better on "
                    f"{bars['baseline_better']}, equal on {bars['equal']} -> {self.path}"]


def precision_histogram(system: PerPrompt, baseline: PerPrompt, measure: str = HISTOGRAM_MEASURE,
                        path: Optional[str] = None) -> Histogram:
    """The per-prompt differences of two systems scored on the same prompts (a paired comparison),
    drawn to ``path``."""
    if system.ids != baseline.ids:
        raise InputError(f"the precision histogram pairs prompts: {system.name} and {baseline.name} were scored "
                         f"on different prompts")
    ours, defined = system.per_prompt_values(measure)
    theirs, _ = baseline.per_prompt_values(measure)
    rows = [(pid, float(a - b)) for pid, a, b, used in zip(system.ids, ours, theirs, defined) if used]
    rows.sort(key=lambda row: -row[1])
    return Histogram(measure, system.name, baseline.name, [pid for pid, _ in rows], [d for _, d in rows], path)


def draw_curves(curves: Dict[str, List[Optional[float]]], path: str, overwrite: bool = False) -> None:
    """The systems' curves in one figure, each labelled with its 11-point average."""
    from . import plots  # matplotlib: only when a figure is drawn

    def label(name: str) -> str:
        average = eleven_point(curves[name])
        return name if average is None else f"{name} (11-pt avg {average:.3f})"

    plots.line_plot(LEVELS, {label(name): curve for name, curve in curves.items()}, path, overwrite=overwrite,
                    title="mean interpolated recall-precision curve", xlabel="recall",
                    ylabel="interpolated precision (mean over prompts)")


def draw_histogram(histogram: Dict, path: str, test: str, p_value: Optional[float], overwrite: bool = False) -> None:
    """:meth:`Histogram.as_dict`'s bars, the counts of wins in the legend and the paired ``test``'s
    p-value of the measure in the title."""
    from . import plots

    system, baseline, measure = histogram["system"], histogram["baseline"], histogram["measure"]
    shown = "" if p_value is None else f"; paired {test} p = {p_value:.3g}"
    plots.difference_bars(histogram["differences"], path, overwrite=overwrite,
                          title=f"precision histogram: {measure} of {system} minus {baseline}{shown}",
                          xlabel=f"prompts ({len(histogram['differences'])}; {histogram['equal']} equal), "
                                 f"sorted by the difference",
                          ylabel=f"{measure} difference",
                          above=f"{system} better: {counted(histogram['system_better'], 'prompt')}",
                          below=f"{baseline} better: {counted(histogram['baseline_better'], 'prompt')}")
