"""``nbest-eval select``: how sure its pick is (each checkpoint's interval on the selection measure,
its p-value against the best, the tied set, ``--prefer earliest-tied``) and the averaged checkpoints
(``--average K``), and the table that shows them. See docs/significance.md."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List

from ..analysis.selection import judge_against_best
from ..analysis.systems import System, SystemTable
from ..averaging import best_k
from ..data import InputError
from ..significance import PerPrompt, resamples_for, resolution_note
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


def judge(table: SystemTable, per_prompt: List[PerPrompt], args: argparse.Namespace) -> int:
    """Each checkpoint's interval, p-values against the best and tie (its notes); the tied set and the
    pick (``choice``) in the table's extra. Returns the resamples used: --n-samples, or enough for
    Holm over the checkpoints (1,000 cannot tell anything apart among 50 or more)."""
    n_samples = args.n_samples or resamples_for(len(per_prompt) - 1, args.paired, args.alpha)
    note = resolution_note(len(per_prompt) - 1, n_samples, args.alpha) if args.paired != "t" else None
    if note:
        print(f"nbest-eval select: warning: {note}", file=sys.stderr)
    names = [s.name for s in table.systems]
    best = names.index(table.extra["best"]) if table.extra["best"] is not None else None
    table.extra.update(paired=args.paired, n_samples=n_samples or None, seed=args.seed, alpha=args.alpha,
                       prefer=args.prefer, tied=[], choice=table.extra["best"])
    if best is None:
        return n_samples
    verdicts = judge_against_best(per_prompt, best, args.metric, args.paired, n_samples, args.seed, args.alpha)
    for system, verdict in zip(table.systems, verdicts):
        system.notes.update(verdict.notes())
    table.extra["tied"] = [name for name, verdict in zip(names, verdicts) if verdict.tied]
    if args.prefer == "earliest-tied":
        table.extra["choice"] = table.extra["tied"][0]
    return n_samples


def average_best(args: argparse.Namespace, table: SystemTable) -> str:
    """Average the --average best checkpoints by --metric into --average-out; its path."""
    chosen = averaged_checkpoints(table, args)
    if args.hf:
        from ..hf.averaging import average_checkpoints

        return average_checkpoints(chosen, args.average_out, overwrite=args.force)
    from ..fairseq.averaging import average_checkpoints

    return average_checkpoints(chosen, args.average_out, trust=args.trust_checkpoints, overwrite=args.force)


def judge_average(table: SystemTable, per_prompt: List[PerPrompt], average: System, averaged: PerPrompt,
                  args: argparse.Namespace, n_samples: int) -> None:
    """The average's row: its interval and p-value against the best single checkpoint."""
    best = table.names.index(table.extra["best"])
    verdict = judge_against_best([per_prompt[best], averaged], 0, args.metric, args.paired, n_samples,
                                 args.seed, args.alpha)[1]
    average.notes.update(verdict.notes(), averaged="+".join(map(system_name, averaged_checkpoints(table, args))))
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
    if "patience" in table.extra:
        stop = table.extra["patience_stopped_at"]
        print(f"--patience {table.extra['patience']} would have " +
              (f"stopped after {stop} and kept {table.extra['patience_choice']} (P)" if stop else
               f"trained to the end and kept {table.extra['patience_choice']} (P)"))


_TEST_NAMES = {"bs": "paired bootstrap", "ar": "approximate randomization", "t": "paired t-test"}



def system_name(path: str) -> str:
    """A checkpoint's or n-best file's name in the table: its file or directory name."""
    return os.path.basename(os.path.normpath(path))
