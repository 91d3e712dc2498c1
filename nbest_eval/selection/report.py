"""``nbest-eval select``'s result: :class:`SelectReport`, the checkpoints scored and what
:func:`~nbest_eval.selection.choosing.select` decided about them, named by checkpoint, which renders
itself as the text table, as JSON and as CSV (the ``--save`` table: a
:class:`~nbest_eval.analysis.systems.SystemTable` with select's keys beside the systems)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..analysis.recall_precision import Curves
from ..analysis.systems import Rows, System, SystemTable, read_table, table_text
from ..analysis.text import format_value
from ..data import InputError
from ..files.output import PathLike
from ..significance import Interval, get_test
from ..training.early_stopping import EarlyStopping
from .verdicts import Average, Choice, Selection, StoppingReplay, Verdict


def system_name(path: str) -> str:
    """A checkpoint's or n-best file's name in the table: its file or directory name."""
    return os.path.basename(os.path.normpath(path))


def curve_legends(checkpoints: Sequence[str], pick: Optional[str]) -> Dict[str, str]:
    """--pr-curve's checkpoints in training order, each with its legend (``checkpoint9.pt (pick,
    last)``): the pick, the first and the last of ``checkpoints`` (names), as three curves stay
    readable where all would not."""
    roles = {"first": checkpoints[0], "pick": pick, "last": checkpoints[-1]}
    return {name: f"{name} ({', '.join(role for role, n in roles.items() if n == name)})"
            for name in checkpoints if name in roles.values()}


@dataclass
class SelectReport(Rows):
    """The checkpoints (``systems``: name, path, values, in training order; with an average, its row
    last), the :class:`Selection` over them, each measure's signature, the --pr-curve's curves, the
    warnings to show (``warnings``) and each checkpoint's content digest as scored (``digests``, by
    path: what a link to the pick must still hold)."""

    systems: List[System]
    selection: Selection
    signatures: Dict[str, str]
    pr_curve: Optional[Curves] = None
    warnings: List[str] = field(default_factory=list)
    digests: Dict[str, str] = field(default_factory=dict)

    def name(self, index: Optional[int]) -> Optional[str]:
        """The name of the checkpoint at ``index`` (None for None)."""
        return None if index is None else self.systems[index].name

    @property
    def best(self) -> Optional[str]:
        return self.name(self.selection.best)

    @property
    def pick(self) -> Optional[str]:
        """The checkpoint picked under the preference (JSON's ``choice``)."""
        return self.name(self.selection.pick)

    @property
    def tied(self) -> List[str]:
        return [self.systems[i].name for i in self.selection.tied]

    @property
    def pick_path(self) -> Optional[str]:
        return None if self.selection.pick is None else self.systems[self.selection.pick].path

    @classmethod
    def read(cls, path: PathLike) -> SelectReport:
        """The report a ``select --save`` (or ``--json``) table holds: :meth:`from_table` of the file."""
        return cls.from_table(read_table(path))

    @classmethod
    def from_table(cls, table: SystemTable) -> SelectReport:
        """The report that :meth:`to_table` wrote (it renders as it did). A CSV table has no
        selection: an error naming the file."""
        extra = table.extra
        if not {"metric", "best", "choice", "signatures"} <= set(extra):
            raise InputError("not a table of select's (a --save or --json one, in JSON)", table.source)
        names = table.names
        averaged = bool(table.systems) and "averaged" in table.systems[-1].notes
        checkpoints = table.systems[:-1] if averaged else table.systems

        def index(name: Optional[str]) -> Optional[int]:
            return None if name is None else names.index(name)

        best = index(extra["best"])
        values = [s.values.get(extra["metric"]) for s in checkpoints]
        choice = Choice(values, best, [] if best is None else [_verdict(s.notes) for s in checkpoints])
        selection = Selection(extra["metric"], extra["maximize"], choice, extra["paired"], extra["n_samples"] or 0,
                              extra["seed"], extra["alpha"], extra["prefer"], index(extra["choice"]))
        if "stopping" in extra:
            replay = extra["stopping"]
            rule = EarlyStopping(extra["metric"], replay["rule"], replay["patience"], extra["maximize"])
            selection.stopping = StoppingReplay(rule, index(replay["stopped_after"]), index(replay["kept"]),
                                                replay["p_value"])
        if averaged:
            last = table.systems[-1].notes
            selection.average = Average([index(name) for name in last["averaged"].split("+")], _verdict(last))
        curve = extra.get("pr_curve")
        return cls([System(s.name, s.values, s.path) for s in table.systems], selection, extra["signatures"],
                   None if curve is None else Curves(curve["systems"], curve["path"]))

    def curve_legends(self) -> Dict[str, str]:
        """The --pr-curve's legends by checkpoint (:func:`curve_legends`; never the average)."""
        checkpoints = len(self.selection.choice.values)
        return curve_legends(self.names[:checkpoints], self.pick)

    def to_table(self) -> SystemTable:
        """The systems with each one's verdict in its notes, and select's keys beside them: the best,
        the tied set, the pick (``choice``), the early-stopping replay (as ``stopping``, and as
        ``patience`` / ``patience_choice`` / ``patience_stopped_at``, its older keys), the signatures
        and the curves."""
        selection = self.selection
        systems = [System(s.name, s.values, s.path, dict(s.notes)) for s in self.systems]
        for system, verdict in zip(systems, selection.choice.verdicts):
            system.notes.update(verdict.notes())
        if selection.average is not None:
            systems[-1].notes.update(selection.average.verdict.notes(),
                                     averaged="+".join(map(self.name, selection.average.averaged)))
        extra: Dict[str, Any] = {
            "metric": selection.key, "maximize": selection.maximize, "best": self.best, "paired": selection.test,
            "n_samples": selection.n_samples or None, "seed": selection.seed, "alpha": selection.alpha,
            "prefer": selection.prefer, "tied": self.tied, "choice": self.pick}
        replay = selection.stopping
        if replay is not None:
            extra["stopping"] = {"rule": replay.rule.rule, "patience": replay.rule.patience,
                                 "stopped_after": self.name(replay.stopped_after), "kept": self.name(replay.kept),
                                 "p_value": replay.p_value}
            extra.update(patience=replay.rule.patience, patience_choice=self.name(replay.kept),
                         patience_stopped_at=self.name(replay.stopped_after))
        extra["signatures"] = self.signatures
        if self.pr_curve is not None:
            extra["pr_curve"] = self.pr_curve.as_dict()
        return SystemTable(systems, extra)

    def to_json(self) -> str:
        return table_text(self.to_table(), "json")

    def to_csv(self) -> str:
        return table_text(self.to_table(), "csv")

    def to_text(self, columns: Sequence[str] = ()) -> str:
        """The table with ``columns``' measures (default: all) beside the selection measure, what
        select decided below it, and the curves' points."""
        lines = self._table_lines(columns) + self._decision_lines()
        if self.pr_curve is not None:
            lines += self.pr_curve.text()
        return "\n".join(lines) + "\n"

    def _table_lines(self, columns: Sequence[str]) -> List[str]:
        selection, metric = self.selection, self.selection.key
        keys = [metric] + [k for k in (list(columns) or self.keys) if k != metric]
        width = max(len(n) for n in self.names + ["checkpoint"])
        kept = selection.stopping.kept if selection.stopping else None
        lines = [f"     {'checkpoint':<{width}}  {keys[0]:>12}  {'95% CI':>17}  {'p':>7}  {'p_holm':>7}  " +
                 "  ".join(f"{k:>12}" for k in keys[1:])]
        for i, system in enumerate(self.to_table().systems):
            notes, averaged = system.notes, "averaged" in system.notes
            mark = "".join(flag if test else " " for flag, test in (
                ("*", i == selection.best), ("T", i in selection.tied), ("P", i == kept), ("A", averaged)))
            ci = "" if notes.get("ci_low") is None else f"[{notes['ci_low']:.4f}, {notes['ci_high']:.4f}]"
            lines.append(f"{mark} {system.name:<{width}}  {format_value(system.values.get(metric)):>12}  {ci:>17}  "
                         f"{format_value(notes.get('p_value')):>7}  {format_value(notes.get('p_holm')):>7}  " +
                         "  ".join(f"{format_value(system.values.get(k)):>12}" for k in keys[1:]))
        hidden = [k for k in self.keys if k not in keys]
        if hidden:
            lines.append(f"({len(hidden)} more measures, {', '.join(hidden)}: --columns all, or --json, --csv, "
                         f"--save FILE)")
        return lines

    def _decision_lines(self) -> List[str]:
        selection = self.selection
        lines = ["", f"best by {selection.key}: {self.best} (*)"]
        if selection.best is not None:
            test = get_test(selection.test)
            resamples = f", {selection.n_samples} {test.unit}" if test.resamples else ""
            lines.append(f"tied with it (T; {test.title}{resamples}, Holm-corrected p >= {selection.alpha}): "
                         f"{', '.join(self.tied)}")
            if selection.pick != selection.best:
                lines.append(f"picked ({selection.prefer}): {self.pick}")
        if selection.average is not None:
            verdict = "tied with" if selection.average.verdict.tied else "significantly different from"
            lines.append(f"average (A) of {', '.join(map(self.name, selection.average.averaged))}: "
                         f"{self.systems[-1].name}, {verdict} the best")
        lines.append(f"signature: {self.signatures[selection.key]}")
        replay = selection.stopping
        if replay is not None:
            p = "" if replay.p_value is None else f", p = {format_value(replay.p_value)} against the best"
            where = f"stopped after {self.name(replay.stopped_after)}" if replay.trained else "trained to the end"
            lines.append(f"--stopping {replay.rule.rule} --patience {replay.rule.patience} would have {where} "
                         f"and kept {self.name(replay.kept)} (P{p})")
        return lines


def _verdict(notes: Dict[str, Any]) -> Verdict:
    """A checkpoint's verdict from its notes in a table (:meth:`Verdict.notes`)."""
    ci = None if notes.get("ci_low") is None else Interval(notes["ci_mean"], notes["ci_low"], notes["ci_high"])
    return Verdict(ci, notes.get("p_value"), notes.get("p_holm"), bool(notes.get("tied")))
