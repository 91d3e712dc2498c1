"""``compare``'s text output (without --json): the agreement table, the BLEU grid, the scatter fits,
the recall-precision curves and the precision histogram, the paired tests, the signatures."""

from __future__ import annotations

from typing import Dict

from ..analysis.agreement import DEFAULT_COEFFICIENTS
from ..significance import Interval
from .common import format_interval, format_value, reported


def print_text(result: Dict) -> None:
    """Every part of ``compare``'s result that is there, in that order."""
    print_report(result)
    print_pictures(result)
    if "paired" in result:
        print_paired(result)
    for key, signature in result.get("signatures", {}).items():
        print(f"signature of {key}: {signature}")


def print_pictures(result: Dict) -> None:
    """The points of --pr-curve (a row per system) and the wins of --precision-histogram."""
    if "pr_curve" in result:
        curve = result["pr_curve"]
        width = max(len(name) for name in curve["systems"])
        print(f"\nmean interpolated precision at each recall level -> {curve['path']}")
        print(f"{'recall':<{width}}" + "".join(f"{level:>8.1f}" for level in curve["levels"]))
        for name, points in curve["systems"].items():
            print(f"{name:<{width}}" + "".join(f"{format_value(v):>8}" for v in points))
    if "precision_histogram" in result:
        bars = result["precision_histogram"]
        print(f"\n{bars['measure']} per prompt, {bars['system']} minus {bars['baseline']}, over "
              f"{len(bars['differences'])} prompts: {bars['system']} better on {bars['system_better']}, "
              f"{bars['baseline']} better on {bars['baseline_better']}, equal on {bars['equal']} -> {bars['path']}")


def print_paired(result: Dict) -> None:
    paired = result["paired"]
    test = {"bs": f"paired bootstrap, {paired['n_samples']} resamples, seed {paired['seed']}",
            "ar": f"approximate randomization, {paired['n_samples']} trials, seed {paired['seed']}",
            "t": "paired t-test on per-prompt values"}[paired["test"]]
    width = max([len("system")] + [len(n) for n in paired["systems"]])
    print(f"\n{test}, against {paired['baseline']}; p_holm: Holm-corrected over "
          f"{len(paired['systems']) - 1} system(s)")
    for key in result["signatures"]:
        print(f"\n{key}\n{'system':<{width}}  {'score':>10}  {'p':>8}  {'p_holm':>8}  interval")
        for name, found in paired["systems"].items():
            row, ci = found[key], found[key]["ci"]
            interval = "" if ci is None else format_interval(Interval(**ci))
            score = format_value(reported(key, row["score"]))
            print(f"{name:<{width}}  {score:>10}  {format_value(row['p_value']):>8}  "
                  f"{format_value(row['p_holm']):>8}  {interval}")


def print_report(result: Dict) -> None:
    print(f"{len(result['systems'])} systems; reference: {result['reference']}")
    width = max([len("measure")] + [len(m) for m in result["agreement"]])
    print(f"{'measure':<{width}}  " + "  ".join(f"{c:>12}" for c in DEFAULT_COEFFICIENTS) + "    n")
    for measure, values in result["agreement"].items():
        cells = "  ".join(f"{format_value(values[c]):>12}" for c in DEFAULT_COEFFICIENTS)
        print(f"{measure:<{width}}  {cells}  {values['n']:>3}")
    if "bleu_grid" in result:
        grid = result["bleu_grid"]
        print(f"\n{grid['coefficient']} of bleu_{{x}}x{{y}} with {result['reference']} (rows y, columns x)")
        print("y\\x   " + "".join(f"{x:>9}" for x in grid["x"]))
        for y, row in zip(grid["y"], grid["values"]):
            print(f"{y:<6}" + "".join(f"{format_value(v):>9}" for v in row))
    for plot in result["scatter"]:
        print(f"\n{plot['y']} vs {plot['x']}: r^2 = {plot['r2']:.4f} -> {plot['path']}")
