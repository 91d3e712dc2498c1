"""Gold-completeness study: does a gold with fewer translations rank the systems the same way?

Paper section 3.2, after Zobel 1998.

For each fraction f (default 0.1, 0.2, ..., 1.0) every prompt keeps its ceil(f * n) highest-weight
translations (ties in weight keep file order), every system is rescored with --metrics (default
map), and the ranking is compared with the full-gold ranking by Spearman and Pearson Rank (the full
gold as the reference). At f = 1 the gold is unchanged, so both are 1 there. --plot draws the
agreement against f. --plot is checked before any work (an existing file needs --force; an input
is refused even with --force). Each system's prompt coverage is reported on stderr, as by compare;
--shared-prompts, as in compare, scores only the gold prompts that every system covers.
"""

from __future__ import annotations

import argparse
import json

from ..analysis.ablation import COEFFICIENTS, FRACTIONS, ablate
from ..files.writable import check_outputs
from .common import add_scorer_arguments, format_value, scorer_from_args
from .compare import add_nbest_arguments, inputs_of, load_runs


def fraction_list(text: str) -> list:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or not all(0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be in (0, 1], got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_nbest_arguments(parser, required=True)
    parser.add_argument("--fractions", type=fraction_list, default=list(FRACTIONS), metavar="F,F,...",
                        help="fractions of each prompt's translations to keep (default: 0.1,0.2,...,1.0)")
    parser.add_argument("--plot", metavar="OUT.png", help="line plot of the agreement against the fraction")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--force", action="store_true", help="overwrite --plot's file if it exists")
    add_scorer_arguments(parser, default_metrics=("map",))


def run(args: argparse.Namespace) -> int:
    from ..analysis import plots  # matplotlib: only when a command runs, not for --help

    check_outputs({"--plot": args.plot}, inputs_of(args), args.force, figures={"--plot"})
    gold, runs, covered = load_runs(args)
    result = ablate(gold, runs, lambda: scorer_from_args(args), args.fractions)
    fractions = list(result.tables)
    if args.plot:
        series = {f"{metric} {coef}": [result.agreement[f][metric][coef] for f in fractions]
                  for metric in result.metrics for coef in COEFFICIENTS}
        plots.line_plot(fractions, series, args.plot, overwrite=args.force, xlabel="fraction of translations kept",
                        ylabel="agreement with the full-gold ranking",
                        title=f"Gold ablation, {len(runs)} systems")
    if args.json:
        print(json.dumps({**result.to_json(), "n_prompts": len(gold), "coverage": covered}, ensure_ascii=False))
        return 0
    total = sum(len(p.translations) for p in gold)
    columns = [f"{metric}:{coef}" for metric in result.metrics for coef in COEFFICIENTS]
    print(f"{len(runs)} systems, {len(gold)} prompts, {total} translations; agreement with the full-gold ranking")
    print(f"{'fraction':>8}  {'kept':>8}  " + "  ".join(f"{c:>18}" for c in columns))
    for f in fractions:
        cells = [format_value(result.agreement[f][m][c]) for m in result.metrics for c in COEFFICIENTS]
        print(f"{f:>8g}  {result.kept[f]:>8}  " + "  ".join(f"{c:>18}" for c in cells))
    return 0
