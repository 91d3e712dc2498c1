"""The per-system score table that ``compare``, ``ablate`` and ``select`` read and write.

An ordered list of systems, each a name, an optional path (its n-best file) and metric key ->
value (None where a metric is undefined). Two file forms:

- JSON: ``{"systems": [{"name": ..., "path": ..., "values": {key: value or null}}], ...}``. Other
  top-level keys (e.g. ``"metric"``, ``"best"`` from ``select``) are kept in :attr:`SystemTable.extra`
  and written back unchanged.
- CSV: header ``system,<key>,...``, one row per system, an empty cell for None. It has no paths and
  no extra keys.

A system's :data:`NOTES` (from ``select``) go beside its values: JSON keys of the system's object
(read back as notes), CSV columns after the measures (left out when read); never measures.

:func:`read_table` tells the two apart by content (JSON starts with ``{``); :func:`write_table` by
the extension (``.csv``, anything else is JSON). Writers never replace a file unless asked.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..data import Gold, InputError, NBest
from ..files.output import PathLike, write_text
from ..formats import open_input, read_nbest
from ..scorer import Scored, Scorer

#: what ``select`` says of a checkpoint besides its values (its interval on the selection measure, its
#: p-values against the best, whether it is tied with the best, whether it is an average): written
#: beside the values, never read back as measures
NOTES = ("ci_mean", "ci_low", "ci_high", "p_value", "p_holm", "tied", "averaged")


@dataclass
class System:
    name: str
    values: Dict[str, Optional[float]]
    path: Optional[str] = None
    notes: Dict[str, Any] = field(default_factory=dict)


class Rows:
    """The names and the measures of a table of ``self.systems`` (:class:`System` rows)."""

    @property
    def names(self) -> List[str]:
        return [s.name for s in self.systems]

    @property
    def keys(self) -> List[str]:
        """Every measure, in first-seen order."""
        return list(dict.fromkeys(k for s in self.systems for k in s.values))


@dataclass
class SystemTable(Rows):
    systems: List[System]
    extra: Dict[str, Any] = field(default_factory=dict)
    #: the file it was read from, for error messages
    source: Optional[str] = None

    def __post_init__(self):
        seen = set()
        for system in self.systems:
            if system.name in seen:
                raise InputError(f"duplicate system name {system.name!r}", self.source)
            seen.add(system.name)


    def column(self, key: str) -> List[Optional[float]]:
        """Every system's value of ``key`` (None where missing); an unknown key is an error naming it."""
        if key not in self.keys:
            raise InputError(f"unknown measure {key!r}; the table has: {', '.join(self.keys) or 'none'}", self.source)
        return [s.values.get(key) for s in self.systems]


#: (system name, n-best file, its n-best lists)
Run = Tuple[str, Optional[str], NBest]


def read_runs(gold: Gold, paths: Sequence[str], names: Optional[Sequence[str]] = None,
              format: str = "auto", **reading: Any) -> List[Run]:
    """The n-best files as runs named by ``names``, else by file stem; names must be distinct.
    ``reading``: :func:`~nbest_eval.formats.read_nbest`'s options (``max_line_bytes``, ...)."""
    if names is not None and len(names) != len(paths):
        raise InputError(f"{len(names)} name(s) for {len(paths)} n-best file(s)")
    names = list(names) if names is not None else [Path(p).stem for p in paths]
    repeated = [n for n in names if names.count(n) > 1]
    if repeated:
        raise InputError(f"system name {repeated[0]!r} is used twice; give distinct names with --names")
    return [(name, path, read_nbest(path, gold, format, **reading)) for name, path in zip(names, paths)]


def coverage(gold: Gold, runs: Sequence[Run]) -> Dict[str, FrozenSet[str]]:
    """Per run, the gold prompts that have a non-empty n-best list: the others score as empty lists,
    so runs that cover different prompts are ranked on unequal terms."""
    return {name: frozenset(pid for pid in gold.ids() if nbest.get(pid)) for name, _, nbest in runs}


def score_systems(scorer: Scorer, gold: Gold, runs: Sequence[Run], scored: Optional[Dict[str, Scored]] = None
                  ) -> SystemTable:
    """Score each (name, path, n-best lists) run with one scorer, so reference statistics are built once;
    ``scored``, if given, receives each run's :class:`Scored` with its per-prompt statistics."""
    systems = []
    for name, path, nbest in runs:
        result = scorer.score(gold, nbest, keep_per_prompt=scored is not None)
        if scored is not None:
            scored[name] = result
        systems.append(System(name, dict(result.values), path))
    return SystemTable(systems)


def read_table(path: PathLike) -> SystemTable:
    """A systems table (JSON or CSV), read in bounded lines as every input is (see :func:`open_input`)."""
    with open_input(path) as lines:
        text = "\n".join(line for _, line in lines)
        name = lines.name
    return _from_json(text, name) if text.lstrip().startswith("{") else _from_csv(text, name)


def write_table(table: SystemTable, path: PathLike, overwrite: bool = False) -> None:
    name = os.fspath(path)
    text = table_text(table, "csv" if name.lower().endswith(".csv") else "json")
    write_text(path, text, overwrite)


def table_text(table: SystemTable, fmt: str) -> str:
    """The table as ``"json"`` or ``"csv"`` text."""
    return _to_csv(table) if fmt == "csv" else _to_json(table)


def _value(raw: Any, where: str, path: str) -> Optional[float]:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise InputError(f"{where}: {raw!r} is not a finite number or null", path)
    return float(raw)


def _from_json(text: str, path: str) -> SystemTable:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg}", path, err.lineno) from None
    except RecursionError:
        raise InputError("not valid JSON: nested too deeply", path) from None
    if not isinstance(data, dict) or not isinstance(data.get("systems"), list):
        raise InputError('expected an object with a "systems" list', path)
    systems = []
    for i, entry in enumerate(data["systems"], 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) \
                or not isinstance(entry.get("values", {}), dict):
            raise InputError(f'system {i}: expected {{"name": str, "path": str, "values": {{...}}}}', path)
        values = {str(k): _value(v, f"system {entry['name']!r}, {k}", path) for k, v in entry.get("values", {}).items()}
        notes = {k: v for k, v in entry.items() if k in NOTES}
        systems.append(System(entry["name"], values, entry.get("path"), notes))
    return SystemTable(systems, {k: v for k, v in data.items() if k != "systems"}, path)


def _from_csv(text: str, path: str) -> SystemTable:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not rows[0] or rows[0][0].strip() != "system":
        raise InputError('expected a CSV header "system,<metric>,..."', path, 1)
    keys = [k.strip() for k in rows[0][1:]]
    if len(set(keys)) != len(keys) or "" in keys:
        raise InputError("empty or repeated metric name in the header", path, 1)
    systems = []
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(keys) + 1:
            raise InputError(f"{len(row)} fields, the header has {len(keys) + 1}", path, line)
        values = {}
        for key, cell in zip(keys, row[1:]):
            if key in NOTES:
                continue
            try:
                values[key] = _value(float(cell), key, path) if cell.strip() else None
            except ValueError:
                raise InputError(f"{key}: {cell!r} is not a number", path, line) from None
        systems.append(System(row[0], values))
    return SystemTable(systems, source=path)


def _to_json(table: SystemTable) -> str:
    systems = [{"name": s.name, "path": s.path, "values": s.values, **s.notes} for s in table.systems]
    return json.dumps({"systems": systems, **table.extra}, indent=2, ensure_ascii=False) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _to_csv(table: SystemTable) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    notes = [n for n in NOTES if any(n in s.notes for s in table.systems)]
    writer.writerow(["system"] + table.keys + notes)
    for s in table.systems:
        writer.writerow([s.name] + [_cell(s.values.get(k)) for k in table.keys] +
                        [_cell(s.notes.get(n)) for n in notes])
    return out.getvalue()
