"""``nbest-eval compare``'s result: :class:`Comparison`, how each measure ranks the systems against
a reference measure (:mod:`.agreement`), with what was asked besides (the BLEU grid, scatter fits,
recall-precision curves, paired tests and the precision histogram, signatures). It renders itself as
text and as JSON; :func:`compare_systems` builds it from a systems table (and, for the paired
tests, the systems' per-prompt statistics)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..data import Gold, InputError
from ..scorer import Scored, Scorer
from ..signature import resampling, signatures, size_range
from ..significance import (
    DEFAULT_SEED,
    PairedResult,
    PairedTest,
    PerPrompt,
    confidence_intervals,
    get_test,
    interval_note,
    resolution_note,
)
from .agreement import DEFAULT_COEFFICIENTS, agreement
from .recall_precision import Curves, Histogram, mean_curves, precision_histogram
from .systems import Run, SystemTable, score_systems
from .text import format_interval, format_value, reported


@dataclass
class BleuGrid:
    """``coefficient`` of x-best y-reference BLEU (``bleu_{x}x{y}``) with the reference, a row per y."""

    coefficient: str
    x: List[str]
    y: List[str]
    values: List[List[Optional[float]]]

    def as_dict(self) -> Dict:
        return {"coefficient": self.coefficient, "x": self.x, "y": self.y, "values": self.values}

    def text(self, reference: str) -> List[str]:
        return ["", f"{self.coefficient} of bleu_{{x}}x{{y}} with {reference} (rows y, columns x)",
                "y\\x   " + "".join(f"{x:>9}" for x in self.x),
                *(f"{y:<6}" + "".join(f"{format_value(v):>9}" for v in row) for y, row in zip(self.y, self.values))]


@dataclass
class Scatter:
    """The systems under measures ``x`` and ``y`` (``names``, ``xs``, ``ys``: those defined under
    both), their least-squares fit's r^2, and the figure's path."""

    x: str
    y: str
    path: str
    names: List[str]
    xs: List[float]
    ys: List[float]
    r2: float

    def as_dict(self) -> Dict:
        return {"x": self.x, "y": self.y, "path": self.path, "r2": self.r2}


@dataclass
class PairedComparison:
    """Every system against ``baseline`` on every measure with ``test`` (Holm-corrected across the
    systems): ``systems`` maps a name to each measure's result, the baseline's first."""

    test: PairedTest
    baseline: str
    n_samples: int
    seed: Optional[int]
    systems: Dict[str, Dict[str, PairedResult]]

    def as_dict(self) -> Dict:
        resampled = self.test.resamples
        return {"test": self.test.key, "baseline": self.baseline, "n_samples": self.n_samples if resampled else None,
                "seed": self.seed if resampled else None,
                "systems": {name: {key: r.as_dict() for key, r in results.items()}
                            for name, results in self.systems.items()}}

    def text(self, keys: Sequence[str]) -> List[str]:
        """A table per measure of ``keys``: each system's score, p-values and interval."""
        test = self.test.describe(self.n_samples, self.seed)
        width = max([len("system")] + [len(n) for n in self.systems])
        lines = ["", f"{test}, against {self.baseline}; p_holm: Holm-corrected over {len(self.systems) - 1} system(s)"]
        for key in keys:
            lines += ["", key, f"{'system':<{width}}  {'score':>10}  {'p':>8}  {'p_holm':>8}  interval"]
            for name, found in self.systems.items():
                row = found[key]
                interval = "" if row.interval is None else format_interval(row.interval)
                lines.append(f"{name:<{width}}  {format_value(reported(key, row.score)):>10}  "
                             f"{format_value(row.p_value):>8}  {format_value(row.p_holm):>8}  {interval}")
        return lines


@dataclass
class Comparison:
    """``agreement``: per measure, each coefficient with the ``reference`` measure over the systems
    defined under both (and ``n``, how many). The rest is there when asked for, or (``n_prompts``,
    ``coverage``: gold prompts with hypotheses per system, ``signatures``) when n-best files were
    scored."""

    reference: str
    systems: List[str]
    agreement: Dict[str, Dict[str, Any]]
    n_prompts: Optional[int] = None
    coverage: Optional[Dict[str, int]] = None
    signatures: Optional[Dict[str, str]] = None
    paired: Optional[PairedComparison] = None
    precision_histogram: Optional[Histogram] = None
    pr_curve: Optional[Curves] = None
    bleu_grid: Optional[BleuGrid] = None
    scatter: List[Scatter] = field(default_factory=list)
    #: the systems' values compared (written by --write-scores; not part of the JSON)
    table: Optional[SystemTable] = None
    #: where the resamples are too few (not part of the JSON)
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict:
        out: Dict[str, Any] = {"reference": self.reference, "systems": self.systems, "agreement": self.agreement}
        if self.signatures is not None:
            out.update(n_prompts=self.n_prompts, coverage=self.coverage, signatures=self.signatures)
        if self.paired is not None:
            out["paired"] = self.paired.as_dict()
        if self.precision_histogram is not None:
            out["precision_histogram"] = self.precision_histogram.as_dict()
        if self.pr_curve is not None:
            out["pr_curve"] = self.pr_curve.as_dict()
        if self.bleu_grid is not None:
            out["bleu_grid"] = self.bleu_grid.as_dict()
        out["scatter"] = [plot.as_dict() for plot in self.scatter]
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        """The agreement table, then every other part that is there, the signatures last."""
        width = max([len("measure")] + [len(m) for m in self.agreement])
        lines = [f"{len(self.systems)} systems; reference: {self.reference}",
                 f"{'measure':<{width}}  " + "  ".join(f"{c:>12}" for c in DEFAULT_COEFFICIENTS) + "    n"]
        for measure, values in self.agreement.items():
            cells = "  ".join(f"{format_value(values[c]):>12}" for c in DEFAULT_COEFFICIENTS)
            lines.append(f"{measure:<{width}}  {cells}  {values['n']:>3}")
        if self.bleu_grid is not None:
            lines += self.bleu_grid.text(self.reference)
        for plot in self.scatter:
            lines += ["", f"{plot.y} vs {plot.x}: r^2 = {plot.r2:.4f} -> {plot.path}"]
        for part in (self.pr_curve, self.precision_histogram):
            lines += part.text() if part is not None else []
        if self.paired is not None:
            lines += self.paired.text(list(self.signatures or {}))
        lines += [f"signature of {key}: {signature}" for key, signature in (self.signatures or {}).items()]
        return "\n".join(lines) + "\n"


@dataclass
class PerPromptRuns:
    """What the paired tests need besides the table: the scorer, each system's :class:`Scored` with
    its per-prompt statistics (by name), the test and its options, and the precision histogram's
    figure (None: none)."""

    scorer: Scorer
    scored: Mapping[str, Scored]
    test: str
    baseline: str
    n_samples: int
    seed: Optional[int]
    histogram: Optional[str] = None


def compare_systems(table: SystemTable, reference: str, measures: Sequence[str], *, coefficient: str = "spearman",
                    grid: Optional[Tuple[List[str], List[str]]] = None, scatters: Sequence[Tuple[str, str, str]] = (),
                    pr_curve: Optional[str] = None, runs: Optional[PerPromptRuns] = None,
                    n_prompts: Optional[int] = None, coverage: Optional[Dict[str, int]] = None,
                    signatures: Optional[Dict[str, str]] = None) -> Comparison:
    """``measures`` against ``reference`` over ``table``'s systems; with ``grid`` (x and y values),
    the BLEU grid's ``coefficient``; each of ``scatters`` (x, y, figure path) fitted; with
    ``pr_curve`` (the figure's path), the curves; with ``runs``, the paired tests. Checks that
    every scatter can be fitted, so that bad input fails before any figure is drawn. Of scored
    n-best files, ``n_prompts``, ``coverage`` and ``signatures`` are kept as they are."""
    reference_values = table.column(reference)
    comparison = Comparison(reference, table.names, {
        m: agreement(reference_values, table.column(m), keys=(reference, m)) for m in measures if m != reference},
        n_prompts, coverage, signatures, table=table)
    if runs is not None:
        comparison.paired = paired_comparison(runs)
        if runs.histogram:
            comparison.precision_histogram = histogram_of(runs)
    if pr_curve:
        comparison.pr_curve = Curves(mean_curves(table), pr_curve)
    comparison.scatter = [scatter(table, x, y, path) for x, y, path in scatters]
    if grid:
        comparison.bleu_grid = bleu_grid(table, reference, coefficient, *grid)
    return comparison


def compare_runs(scorer: Scorer, gold: Gold, runs: Sequence[Run], reference: str, measures: Sequence[str], *,
                 test: Optional[str] = None, baseline: Optional[str] = None, n_samples: Optional[int] = None,
                 seed: Optional[int] = DEFAULT_SEED, histogram: Optional[str] = None,
                 coverage: Optional[Dict[str, int]] = None,
                 progress: Callable[[Sequence[Run]], Iterable[Run]] = lambda runs: runs, **figures: Any) -> Comparison:
    """Score the (name, path, n-best lists) ``runs`` on ``gold`` with ``scorer`` (which holds every
    measure compared and drawn) and compare them (:func:`compare_systems`; ``figures``: its figure
    options); with ``test`` (a key of significance's tests), every run against ``baseline`` (default:
    the first) with ``n_samples`` (default: the test's) and, with ``histogram`` (the figure's path),
    the precision histogram of two runs."""
    scored: Optional[Dict[str, Scored]] = {} if test else None
    table = SystemTable([system for run in progress(runs)
                         for system in score_systems(scorer, gold, [run], scored).systems])
    paired = get_test(test) if test else None
    n_samples = paired.n_samples(n_samples) if paired else 0
    resampled = paired and resampling(paired, n_samples, seed)
    signed = signatures(scorer, gold, size_range(nbest for _, _, nbest in runs), resampled)
    tests = paired and PerPromptRuns(scorer, scored, paired.key, baseline or runs[0][0], n_samples, seed, histogram)
    comparison = compare_systems(table, reference, measures, runs=tests, n_prompts=len(gold),
                                 coverage=coverage, signatures=signed, **figures)
    if paired:
        notes = [resolution_note(len(runs) - 1, n_samples) if paired.resamples else None,
                 interval_note(n_samples) if paired.gives_intervals else None]
        comparison.warnings = [note for note in notes if note]
    return comparison


def bleu_grid(table: SystemTable, reference: str, coefficient: str, xs: List[str], ys: List[str]) -> BleuGrid:
    reference_values = table.column(reference)
    return BleuGrid(coefficient, xs, ys, [[agreement(reference_values, table.column(f"bleu_{x}x{y}"), [coefficient],
                                                     (reference, f"bleu_{x}x{y}"))[coefficient] for x in xs]
                                          for y in ys])


def scatter(table: SystemTable, x: str, y: str, path: str) -> Scatter:
    """The systems defined under both measures and their fit; an error naming the plot if none can be fitted."""
    from .plots import fit_line  # matplotlib's module: only when a scatter is asked for

    points = [(name, a, b) for name, a, b in zip(table.names, table.column(x), table.column(y))
              if a is not None and b is not None]
    names, xs, ys = ([p[i] for p in points] for i in range(3))
    try:
        r2 = fit_line(xs, ys)[2]
    except InputError as err:
        raise InputError(f"--scatter {x},{y}: {err}") from None
    return Scatter(x, y, path, names, xs, ys, r2)


def paired_comparison(runs: PerPromptRuns) -> PairedComparison:
    """Every other system against the baseline, per measure; the baseline's own row has its score
    (and, where the test gives intervals, its bootstrap interval)."""
    test = get_test(runs.test)
    systems = {name: PerPrompt(runs.scorer, s.per_prompt, name) for name, s in runs.scored.items()}
    others = [s for name, s in systems.items() if name != runs.baseline]
    tested = test.run(systems[runs.baseline], others, runs.n_samples, runs.seed)
    base_ci = confidence_intervals(systems[runs.baseline], runs.n_samples, runs.seed) if test.gives_intervals else {}
    base = {key: PairedResult(runs.scored[runs.baseline].values[key], None, interval=base_ci.get(key))
            for key in runs.scorer.keys}
    return PairedComparison(test, runs.baseline, runs.n_samples, runs.seed, {runs.baseline: base, **tested})


def histogram_of(runs: PerPromptRuns) -> Histogram:
    """The precision histogram: the other system's per-prompt R-precision minus the baseline's."""
    other = next(name for name in runs.scored if name != runs.baseline)
    pair = (PerPrompt(runs.scorer, runs.scored[name].per_prompt, name) for name in (other, runs.baseline))
    return precision_histogram(*pair, path=runs.histogram)
