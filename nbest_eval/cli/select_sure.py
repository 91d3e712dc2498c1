"""``nbest-eval select``'s table of :func:`nbest_eval.selection.select`'s result (each checkpoint's
interval on the selection measure, its p-value against the best, the tied set, the pick, the
early-stopping replay), the averaged checkpoints (``--average K``), and how they are printed. See
docs/significance.md."""

from __future__ import annotations

import argparse
import os
from typing import List, Sequence

from ..analysis.systems import System, SystemTable
from ..data import InputError
from ..selection import Selection, judge_average
from ..selection.averaging import best_k
from ..significance import PerPrompt
from .common import format_value


def check_average(args: argparse.Namespace, inputs: List[str]) -> None:
    """--average K needs K checkpoints, and its output a name no checkpoint has (systems are named so)."""
    if not args.average:
        return
    if args.average > len(inputs):
        raise InputError(f"--average {args.average}: there are only {len(inputs)} checkpoints")
    if system_name(args.average_out) in map(system_name, inputs):
        raise InputError(f"--average-out: a checkpoint is already named {system_name(args.average_out)!r}; a system is "
                         f"named by its file or directory name", args.average_out)


def selection_table(systems: List[System], selection: Selection) -> SystemTable:
    """The table of the checkpoints with each one's verdict in its notes, and in the table's extra
    the best, the tied set, the pick (``choice``) and the early-stopping replay (as ``stopping``, and
    ``patience`` / ``patience_choice`` / ``patience_stopped_at`` as before it)."""
    names = [s.name for s in systems]

    def name(index):
        return None if index is None else names[index]

    for system, verdict in zip(systems, selection.choice.verdicts):
        system.notes.update(verdict.notes())
    extra = {"metric": selection.key, "maximize": selection.maximize, "best": name(selection.best),
             "paired": selection.test, "n_samples": selection.n_samples or None, "seed": selection.seed,
             "alpha": selection.alpha, "prefer": selection.prefer, "tied": [names[i] for i in selection.tied],
             "choice": name(selection.pick)}
    replay = selection.stopping
    if replay is not None:
        extra["stopping"] = {"rule": replay.rule.rule, "patience": replay.rule.patience,
                             "stopped_after": name(replay.stopped_after), "kept": name(replay.kept),
                             "p_value": replay.p_value}
        extra.update(patience=replay.rule.patience, patience_choice=name(replay.kept),
                     patience_stopped_at=name(replay.stopped_after))
    return SystemTable(systems, extra)


def average_best(args: argparse.Namespace, table: SystemTable) -> str:
    """Average the --average best checkpoints by --metric into --average-out; its path."""
    chosen = averaged_checkpoints(table, args)
    if args.hf:
        from ..hf.averaging import average_checkpoints

        return average_checkpoints(chosen, args.average_out, overwrite=args.force)
    from ..fairseq.averaging import average_checkpoints

    return average_checkpoints(chosen, args.average_out, trust=args.trust_checkpoints, overwrite=args.force)


def average_row(table: SystemTable, selection: Selection, per_prompt: List[PerPrompt], average: System,
                averaged: PerPrompt, args: argparse.Namespace) -> None:
    """The average's row: its interval and p-value against the best single checkpoint
    (:func:`~nbest_eval.selection.judge_average`)."""
    chosen = averaged_checkpoints(table, args)
    paths = [s.path for s in table.systems]
    result = judge_average(selection, per_prompt, averaged, [paths.index(p) for p in chosen])
    average.notes.update(result.verdict.notes(), averaged="+".join(map(system_name, chosen)))
    table.systems.append(average)


def averaged_checkpoints(table: SystemTable, args: argparse.Namespace) -> List[str]:
    """The paths of the --average best checkpoints by --metric, best first."""
    return best_k([s.path for s in table.systems], table.column(args.metric), args.average, not args.minimize)


def print_selection(table: SystemTable, selection: Selection, columns: Sequence[str] = ()) -> None:
    """The table as text, with ``columns``' measures (default: all), and below it what
    :func:`~nbest_eval.selection.select` decided."""
    metric, names = selection.key, table.names

    def name(index):
        return None if index is None else names[index]

    shown = list(columns) or table.keys
    keys = [metric] + [k for k in shown if k != metric]
    width = max(len(n) for n in names + ["checkpoint"])
    kept = selection.stopping.kept if selection.stopping else None
    print(f"     {'checkpoint':<{width}}  {keys[0]:>12}  {'95% CI':>17}  {'p':>7}  {'p_holm':>7}  " +
          "  ".join(f"{k:>12}" for k in keys[1:]))
    for i, system in enumerate(table.systems):
        notes, averaged = system.notes, "averaged" in system.notes
        mark = "".join(flag if test else " " for flag, test in (
            ("*", i == selection.best), ("T", i in selection.tied), ("P", i == kept), ("A", averaged)))
        ci = "" if notes.get("ci_low") is None else f"[{notes['ci_low']:.4f}, {notes['ci_high']:.4f}]"
        print(f"{mark} {system.name:<{width}}  {format_value(system.values.get(metric)):>12}  {ci:>17}  "
              f"{format_value(notes.get('p_value')):>7}  {format_value(notes.get('p_holm')):>7}  " +
              "  ".join(f"{format_value(system.values.get(k)):>12}" for k in keys[1:]))
    hidden = [k for k in table.keys if k not in keys]
    if hidden:
        print(f"({len(hidden)} more measures, {', '.join(hidden)}: --columns all, or --json, --csv, --save FILE)")
    print(f"\nbest by {metric}: {name(selection.best)} (*)")
    if selection.best is not None:
        resamples = f", {selection.n_samples} resamples" if selection.test != "t" else ""
        print(f"tied with it (T; {_TEST_NAMES[selection.test]}{resamples}, Holm-corrected p >= {selection.alpha}): "
              f"{', '.join(map(name, selection.tied))}")
        if selection.pick != selection.best:
            print(f"picked ({selection.prefer}): {name(selection.pick)}")
    if selection.average is not None:
        print(f"average (A) of {', '.join(map(name, selection.average.averaged))}: {table.systems[-1].name}, "
              f"{'tied with' if selection.average.verdict.tied else 'significantly different from'} the best")
    print(f"signature: {table.extra['signatures'][metric]}")
    replay = selection.stopping
    if replay is not None:
        p = "" if replay.p_value is None else f", p = {format_value(replay.p_value)} against the best"
        print(f"--stopping {replay.rule.rule} --patience {replay.rule.patience} would have " +
              (f"stopped after {name(replay.stopped_after)}" if replay.trained else "trained to the end") +
              f" and kept {name(replay.kept)} (P{p})")


_TEST_NAMES = {"bs": "paired bootstrap", "ar": "approximate randomization", "t": "paired t-test"}


def system_name(path: str) -> str:
    """A checkpoint's or n-best file's name in the table: its file or directory name."""
    return os.path.basename(os.path.normpath(path))
