"""``nbest-eval select``'s table of :func:`nbest_eval.selection.select`'s result (each checkpoint's
interval on the selection measure, its p-value against the best, the tied set, the pick, the
early-stopping replay), the averaged checkpoints (``--average K``), and how they are printed. See
docs/significance.md."""

from __future__ import annotations

import argparse
import os
from typing import List

from ..analysis.systems import System, SystemTable
from ..averaging import best_k
from ..data import InputError
from ..selection import Selection, judge_average
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


def print_selection(table: SystemTable, metric: str) -> None:
    keys = [metric] + [k for k in table.keys if k != metric]
    width = max(len(n) for n in table.names + ["checkpoint"])
    print(f"     {'checkpoint':<{width}}  {keys[0]:>12}  {'95% CI':>17}  {'p':>7}  {'p_holm':>7}  " +
          "  ".join(f"{k:>12}" for k in keys[1:]))
    for system in table.systems:
        notes = system.notes
        mark = "".join(flag if test else " " for flag, test in (
            ("*", system.name == table.extra["best"]), ("T", notes.get("tied") and "averaged" not in notes),
            ("P", system.name == table.extra.get("patience_choice")), ("A", "averaged" in notes)))
        ci = "" if notes.get("ci_low") is None else f"[{notes['ci_low']:.4f}, {notes['ci_high']:.4f}]"
        print(f"{mark} {system.name:<{width}}  {format_value(system.values.get(metric)):>12}  {ci:>17}  "
              f"{format_value(notes.get('p_value')):>7}  {format_value(notes.get('p_holm')):>7}  " +
              "  ".join(f"{format_value(system.values.get(k)):>12}" for k in keys[1:]))
    extra = table.extra
    print(f"\nbest by {metric}: {extra['best']} (*)")
    if extra["best"] is not None:
        resamples = f", {extra['n_samples']} resamples" if extra["paired"] != "t" else ""
        print(f"tied with it (T; {_TEST_NAMES[extra['paired']]}{resamples}, Holm-corrected p >= {extra['alpha']}): "
              f"{', '.join(extra['tied'])}")
        if extra["choice"] != extra["best"]:
            print(f"picked ({extra['prefer']}): {extra['choice']}")
    for system in table.systems:
        if "averaged" in system.notes:
            print(f"average (A) of {system.notes['averaged'].replace('+', ', ')}: {system.name}, "
                  f"{'tied with' if system.notes['tied'] else 'significantly different from'} the best")
    print(f"signature: {extra['signatures'][metric]}")
    if "stopping" in table.extra:
        replay = table.extra["stopping"]
        p = "" if replay["p_value"] is None else f", p = {format_value(replay['p_value'])} against the best"
        print(f"--stopping {replay['rule']} --patience {replay['patience']} would have " +
              (f"stopped after {replay['stopped_after']}" if replay["stopped_after"] else "trained to the end") +
              f" and kept {replay['kept']} (P{p})")


_TEST_NAMES = {"bs": "paired bootstrap", "ar": "approximate randomization", "t": "paired t-test"}



def system_name(path: str) -> str:
    """A checkpoint's or n-best file's name in the table: its file or directory name."""
    return os.path.basename(os.path.normpath(path))
