"""Compare measures by how they rank systems (Spearman, Kendall, tau_AP, Pearson Rank).

Each measure is compared with a reference measure (default MAP).

Input: a systems table (--scores, JSON or CSV, as --write-scores or select write it), or a gold
file and two or more n-best files (--gold, --nbest), scored here with --metrics (the reference is
always scored). A system is named by its file's stem unless --names is given. A measure that is
undefined for a system (n/a) leaves that system out of that measure's comparison.

tau_AP (the reference as the true ranking) weighs the head of the other measure's ranking most,
Pearson Rank the head of the reference's (docs/analysis.md); each measure ranks
the systems in its own better direction (the error rate e{b}: lower is better), so E agrees as F does. --heatmap draws
--coefficient for every pair of measures: cell (row, column) treats the row measure as the reference.

--bleu-grid OUT.png (n-best input only) scores x-best y-reference BLEU for x in 1, 5, 10, 100,
1000 and y in 1, 5, 10, 100, all, and draws --coefficient of each with the reference (the paper's
Figure 4). A value is dropped when the one before it already covers every hypothesis of the
longest list (x) or every translation of the largest gold set (y): its column would repeat.
--scatter X,Y OUT.png plots the systems under two measures with the least-squares line and r^2
(the paper's Figure 5); repeat it for more plots. --pr-curve OUT.png draws each system's mean
interpolated recall-precision curve at the 11 standard recall levels (its iprec0.0 ... iprec1.0,
scored here, or read from a --scores table that has them; the points in --json as pr_curve).

--paired bs|ar|t (n-best input only) tests every system against --baseline (default: the first) on
every measure: paired bootstrap (1,000 resamples), approximate randomization (10,000 trials) or a
paired t-test on per-prompt values (AP for MAP; means only), resampling prompts, with Holm's
correction across the systems (docs/significance.md). Paired systems must have lists for the same
prompts. --precision-histogram OUT.png, with --paired and two systems, draws per prompt the other
system's R-precision minus the baseline's, one bar per prompt sorted by the difference (the bars in
--json as precision_histogram). Every output is checked before any work (an
existing file needs --force; none may be an input, even with --force), and they are written
together at the end, or none is. With n-best input, each system's prompt coverage (gold prompts
with hypotheses) is reported on stderr, with a warning when the systems cover different prompts;
--shared-prompts then scores every system on the gold prompts that all of them cover (and says how
many), which also lets such systems be paired.
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis.agreement import COEFFICIENTS, agreement
from ..analysis.comparison import Comparison, compare_runs, compare_systems
from ..analysis.recall_precision import HISTOGRAM_MEASURE, IPREC_KEYS, draw_curves, draw_histogram
from ..analysis.systems import Run, coverage, read_runs, read_table, write_table
from ..data import Gold, InputError
from ..files.output import all_or_nothing
from ..files.writable import check_outputs, file_identity
from ..formats import FORMATS, read_gold
from ..scorer import parse_metric_list
from ..significance import TESTS, paired_help
from .common import (
    add_reading_arguments,
    add_resampling_arguments,
    add_scorer_arguments,
    check_inputs,
    check_measures,
    check_nbest_size,
    progress,
    reading_options,
    scorer_from_args,
)

BLEU_X: Tuple[str, ...] = ("1", "5", "10", "100", "1000")
BLEU_Y: Tuple[str, ...] = ("1", "5", "10", "100", "all")


def add_nbest_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    """--gold, --nbest, --names, --format: the n-best input shared with ``ablate``."""
    group = parser.add_argument_group("n-best input")
    group.add_argument("--gold", required=required, help="STAPLE gold file")
    group.add_argument("--nbest", nargs="+", required=required, metavar="FILE", help="one n-best file per system")
    group.add_argument("--names", nargs="+", metavar="NAME", help="system names, one per --nbest file "
                                                                  "(default: the file stems)")
    group.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                       help="format of the n-best files (default: detect each)")
    group.add_argument("--shared-prompts", action="store_true",
                       help="score every system on the gold prompts that every system's file has hypotheses for "
                            "(default: on every gold prompt, a missing one as an empty list)")
    add_reading_arguments(parser)


def load_runs(args: argparse.Namespace) -> Tuple[Gold, List[Run], Dict[str, int]]:
    """The gold, the runs, and how many gold prompts each run has hypotheses for (also on stderr);
    with --shared-prompts, the gold and the runs cut to the prompts every run has hypotheses for."""
    check_nbest_size(args)
    check_inputs({"--gold": args.gold, "--nbest": args.nbest})
    gold = read_gold(args.gold, args.max_line_bytes)
    runs = read_runs(gold, args.nbest, args.names, args.format, max_line_bytes=args.max_line_bytes,
                     **reading_options(args))
    counts = report_coverage(gold, runs, args.shared_prompts)
    return (*shared_prompts(gold, runs), counts) if args.shared_prompts else (gold, runs, counts)


def report_coverage(gold: Gold, runs: Sequence[Run], shared: bool = False) -> Dict[str, int]:
    """Each system's prompt coverage on stderr, with a warning when the systems cover different
    prompts (unless ``shared``, --shared-prompts): a prompt without hypotheses scores as an empty
    list, which can decide a ranking."""
    covered = coverage(gold, runs)
    counts = {name: len(prompts) for name, prompts in covered.items()}
    print(f"prompts with hypotheses (of {len(gold)} in the gold): " +
          ", ".join(f"{name} {count}" for name, count in counts.items()), file=sys.stderr)
    if len(set(covered.values())) > 1 and not shared:
        print("warning: the systems have hypotheses for different prompts; a prompt without any scores as an "
              "empty list, so the ranking partly compares coverage (--shared-prompts scores the prompts they "
              "all cover)", file=sys.stderr)
    return counts


def shared_prompts(gold: Gold, runs: Sequence[Run]) -> Tuple[Gold, List[Run]]:
    """--shared-prompts: the gold prompts that every run has hypotheses for, in gold order, and each
    run's lists for them (said on stderr). The signatures then name that gold (its count and hash)."""
    common = frozenset.intersection(*coverage(gold, runs).values())
    if not common:
        raise InputError("--shared-prompts: no gold prompt has hypotheses in every system's file", gold.path)
    print(f"--shared-prompts: scoring the {len(common)} gold prompts (of {len(gold)}) that every system has "
          f"hypotheses for", file=sys.stderr)
    shared = Gold([prompt for prompt in gold if prompt.id in common], gold.path)
    return shared, [(name, path, {pid: hyps for pid, hyps in nbest.items() if pid in common})
                    for name, path, nbest in runs]


def outputs_of(args: argparse.Namespace, scatters: Sequence[Tuple[Tuple[str, str], str]]) -> Dict[str, Optional[str]]:
    """Option -> output path, for :func:`check_outputs`."""
    return {"--write-scores": args.write_scores, "--heatmap": args.heatmap, "--bleu-grid": args.bleu_grid,
            "--pr-curve": args.pr_curve, "--precision-histogram": args.precision_histogram,
            **{f"--scatter {x},{y}": path for (x, y), path in scatters}}


def inputs_of(args: argparse.Namespace) -> List[str]:
    """The files compare and ablate read, which no output may replace."""
    return [p for p in [getattr(args, "scores", None), args.gold, *(args.nbest or [])] if p]


def with_metrics(args: argparse.Namespace, keys: Sequence[str]) -> argparse.Namespace:
    """The arguments with --metrics replaced, for :func:`scorer_from_args`."""
    return argparse.Namespace(**{**vars(args), "metrics": ",".join(keys)})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", metavar="FILE", help="systems table (JSON or CSV) instead of --gold/--nbest")
    add_nbest_arguments(parser, required=False)
    parser.add_argument("--reference", default="map", metavar="MEASURE",
                        help="the measure every other one is compared with (default: %(default)s)")
    parser.add_argument("--coefficient", default="spearman", choices=list(COEFFICIENTS),
                        help="coefficient drawn by --heatmap and --bleu-grid (default: %(default)s)")
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    out.add_argument("--heatmap", metavar="OUT.png", help="all-pairs agreement heatmap")
    out.add_argument("--bleu-grid", metavar="OUT.png", help="x-best y-reference BLEU grid (needs --nbest)")
    out.add_argument("--scatter", nargs=2, action="append", default=[], metavar=("X,Y", "OUT.png"),
                     help="scatter plot of measure Y against X with the linear fit (repeatable)")
    out.add_argument("--pr-curve", metavar="OUT.png",
                     help="each system's mean interpolated recall-precision curve at the 11 standard recall levels "
                          "(iprec0.0 ... iprec1.0, by --iprec-rule; the points in --json)")
    out.add_argument("--precision-histogram", metavar="OUT.png",
                     help="with --paired and two systems: per prompt, the system's R-precision minus the "
                          "baseline's, one bar per prompt sorted by the difference (the bars in --json)")
    out.add_argument("--write-scores", metavar="FILE", help="write the systems table (.csv, else JSON)")
    out.add_argument("--force", action="store_true", help="overwrite existing output files")
    paired = parser.add_argument_group("paired significance tests (docs/significance.md)")
    paired.add_argument("--paired", choices=TESTS,
                        help=f"test every system against --baseline on every measure: {paired_help()}")
    paired.add_argument("--baseline", metavar="NAME", help="the system the others are tested against "
                                                           "(default: the first)")
    add_resampling_arguments(parser, "--paired bs: resamples; --paired ar: trials")
    add_scorer_arguments(parser)


def covering(values: Sequence[str], limit: int) -> List[str]:
    """The grid values up to the first that covers ``limit`` items ("all" covers any)."""
    kept: List[str] = []
    for value in values:
        if kept and (kept[-1] == "all" or int(kept[-1]) >= limit):
            break
        kept.append(value)
    return kept


def bleu_grid(gold: Gold, runs: Sequence[Run]) -> Tuple[List[str], List[str]]:
    longest = max((len(hyps) for _, _, nbest in runs for hyps in nbest.values()), default=0)
    largest = max((len(p.translations) for p in gold), default=0)
    return covering(BLEU_X, longest), covering(BLEU_Y, largest)


def need_two_systems(count: int, source: Optional[str] = None) -> None:
    if count < 2:
        raise InputError(f"comparing rankings needs at least 2 systems, got {count}", source)


def parse_scatter(spec: str) -> Tuple[str, str]:
    keys = [k.strip() for k in spec.split(",")]
    if len(keys) != 2 or not all(keys):
        raise InputError(f"--scatter wants two measures as X,Y, got {spec!r}")
    return keys[0], keys[1]


def run(args: argparse.Namespace) -> int:
    if bool(args.scores) == bool(args.gold or args.nbest):
        raise InputError("give either --scores FILE or --gold GOLD --nbest FILE...")
    if args.nbest and not args.gold or args.gold and not args.nbest:
        raise InputError("--gold and --nbest go together")
    if args.bleu_grid and not args.nbest:
        raise InputError("--bleu-grid scores n-best files: give --gold and --nbest instead of --scores")
    if (args.paired or args.baseline) and not args.nbest:
        raise InputError("--paired resamples prompts: give --gold and --nbest (a --scores table has no per-prompt "
                         "statistics)")
    if args.baseline and not args.paired:
        raise InputError("--baseline goes with --paired bs|ar|t")
    if args.precision_histogram and (not args.paired or len(args.nbest) != 2):
        raise InputError(f"--precision-histogram compares two systems prompt by prompt: give --paired bs|ar|t and "
                         f"two --nbest files (got {len(args.nbest or [])})")
    scatters = [(parse_scatter(spec), path) for spec, path in args.scatter]
    outputs = outputs_of(args, scatters)
    check_outputs(outputs, inputs_of(args), args.force, figures=set(outputs) - {"--write-scores"})
    if args.nbest:
        check_measures(args.reference, parse_metric_list(args.metrics), [k for (x, y), _ in scatters for k in (x, y)])

    if args.scores:
        table = read_table(args.scores)
        need_two_systems(len(table.systems), table.source)
        comparison = compare_systems(table, args.reference, table.keys, **figures_of(args, scatters))
    else:
        need_two_systems(len(args.nbest))
        comparison = compare_nbest(args, scatters)
    with all_or_nothing():
        write_outputs(args, comparison)
    sys.stdout.write(comparison.to_json() if args.json else comparison.to_text())
    return 0


def figures_of(args: argparse.Namespace, scatters: Sequence[Tuple[Tuple[str, str], str]]) -> Dict:
    """:func:`compare_systems`' options of the figures asked for (the BLEU grid's are the n-best input's)."""
    return {"coefficient": args.coefficient, "pr_curve": args.pr_curve,
            "scatters": [(x, y, path) for (x, y), path in scatters]}


def compare_nbest(args: argparse.Namespace, scatters: Sequence[Tuple[Tuple[str, str], str]]) -> Comparison:
    """Score the n-best files (with the measures the figures need) and compare them, with --paired's tests."""
    gold, runs, covered = load_runs(args)
    baseline = paired_baseline(args, gold, runs)
    measures = parse_metric_list(args.metrics)
    keys = [args.reference] + measures
    grid = bleu_grid(gold, runs) if args.bleu_grid else None
    if grid:
        keys += [f"bleu_{x}x{y}" for y in grid[1] for x in grid[0]]
    keys += (IPREC_KEYS if args.pr_curve else []) + ([HISTOGRAM_MEASURE] if args.precision_histogram else [])
    scorer = scorer_from_args(with_metrics(args, list(dict.fromkeys(keys))))
    comparison = compare_runs(scorer, gold, runs, args.reference, measures, test=args.paired, baseline=baseline,
                              n_samples=args.n_samples, seed=args.seed, histogram=args.precision_histogram,
                              coverage=covered, grid=grid, progress=lambda runs: progress(runs, "scoring systems",
                                                                                          "system"),
                              **figures_of(args, scatters))
    for note in comparison.warnings:
        print(f"nbest-eval compare: warning: {note}", file=sys.stderr)
    return comparison


def write_outputs(args: argparse.Namespace, comparison: Comparison) -> None:
    """--write-scores and the figures."""
    from ..analysis import plots  # matplotlib: only when a command runs, not for --help

    if args.write_scores:
        write_table(comparison.table, args.write_scores, args.force)
    if args.heatmap:
        every = [args.reference] + list(comparison.agreement)
        columns = {m: comparison.table.column(m) for m in every}
        plots.heatmap([[agreement(columns[r], columns[c], [args.coefficient], (r, c))[args.coefficient] for c in every]
                       for r in every], every, every, args.heatmap, overwrite=args.force,
                      title=f"{args.coefficient} between system rankings (row = reference)", label=args.coefficient)
    grid = comparison.bleu_grid
    if grid:
        plots.heatmap(grid.values, grid.y, grid.x, args.bleu_grid, overwrite=args.force, xlabel="x (hypotheses)",
                      ylabel="y (references)", label=args.coefficient,
                      title=f"{args.coefficient} of x-best y-reference BLEU with {args.reference}")
    if comparison.pr_curve:
        draw_curves(comparison.pr_curve.systems, args.pr_curve, overwrite=args.force)
    histogram = comparison.precision_histogram
    if histogram:
        p_value = comparison.paired.systems[histogram.system][histogram.measure].p_value
        draw_histogram(histogram.as_dict(), args.precision_histogram, comparison.paired.test.key, p_value,
                       overwrite=args.force)
    for plot in comparison.scatter:
        plots.scatter_fit(plot.xs, plot.ys, plot.names, plot.path, xlabel=plot.x, ylabel=plot.y, overwrite=args.force)


def paired_baseline(args: argparse.Namespace, gold: Gold, runs: Sequence[Run]) -> Optional[str]:
    """--baseline's system (default: the first), checked before scoring; every system must have lists
    for the baseline's prompts, or the pairing would compare coverage."""
    if not args.paired:
        return None
    seen: Dict = {}
    for path in args.nbest:
        first = seen.setdefault(file_identity(path), path)
        if first != path and file_identity(path) is not None:
            raise InputError(f"--paired: {path} and {first} are one file (a link or a second name): a system "
                             f"would be tested against itself and counted in Holm's correction")
    names = [name for name, _, _ in runs]
    baseline = args.baseline or names[0]
    if baseline not in names:
        raise InputError(f"--baseline {baseline!r} is not a system; the systems are: {', '.join(names)}")
    covered = coverage(gold, runs)
    for name in names:
        missing = sorted(covered[baseline] - covered[name], key=gold.ids().index)
        extra = sorted(covered[name] - covered[baseline], key=gold.ids().index)
        if missing or extra:
            which = (f"has no list for {len(missing)} of {baseline}'s prompts (the first: {missing[0]})" if missing
                     else f"has lists for {len(extra)} prompts that {baseline} lacks (the first: {extra[0]})")
            raise InputError(f"--paired: {name} cannot be paired with {baseline}: it {which} (pass --shared-prompts "
                             f"to pair them on the prompts both cover)")
    return baseline
