"""What an early-stopping rule remembers between validations, and a saved copy checked before it is trusted.

:class:`State` is the whole memory of :class:`~nbest_eval.training.early_stopping.EarlyStopping`: a few
counters, the kept validation, and the reference validation's per-prompt statistics (the measure's
columns only). Checkpoints save it (fairseq's task state, the Trainer's ``trainer_state.json``) and
training resumes from it, so a saved copy is input like any other: :func:`restored` takes one only
once it holds together (each field of its type, counts and steps within the validations seen and the
current step, its statistics of this run's measure, options, layout and prompts, and giving its
values) and otherwise names the first thing wrong (InputError), so that the caller can drop it with
one warning and go on from a fresh state.
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..data import InputError
from ..scorer import Scorer
from ..significance import PerPrompt

Rows = List[List[float]]


@dataclass(frozen=True)
class State:
    """Everything the rule remembers between validations; JSON-able (:meth:`to_dict`)."""

    seen: int = 0
    warming_up: bool = True
    runs: int = 0
    stopped: bool = False
    reference: Optional[int] = None  # the validation the rule compares with
    reference_value: Optional[float] = None
    reference_rows: Optional[Rows] = None  # its per-prompt statistics, the measure's columns
    floor_rows: Optional[Rows] = None  # the first validation's, while warming up until significant
    kept: Optional[int] = None
    kept_value: Optional[float] = None
    kept_step: Optional[int] = None  # the caller's name for the kept validation (an update, a step)
    prompts: Optional[str] = None  # digest of the prompt ids the statistics cover
    measure: Optional[str] = None  # the measure and the options its statistics are of (measure_name)
    statistics: Optional[List[str]] = None  # the names of the rows' columns: the scorer's, for the measure
    gold: Optional[str] = None  # Gold.digest() of the validated prompts' gold the statistics were computed against

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def covers(self, ids: Sequence[str]) -> bool:
        """Whether the statistics kept are of the prompts ``ids`` (or no statistics are kept yet)."""
        return self.prompts is None or self.prompts == prompts_digest(ids)

    @classmethod
    def from_dict(cls, data: Any) -> State:
        """The state :meth:`to_dict` gave (also one saved before ``measure`` and ``statistics``
        existed); :class:`~nbest_eval.data.InputError` for anything else. Each field is checked
        alone here; :func:`restored` checks the state as a whole."""
        names = [f.name for f in fields(cls)]
        if not isinstance(data, Mapping):
            raise InputError(f"not an early-stopping state: a {type(data).__name__}, not a dict")
        missing = [name for name in names if name not in data and name not in ADDED]
        extra = [f"{key!r:.40}" for key in data if key not in names]
        if missing or extra:
            raise InputError("not an early-stopping state: " + "; ".join(
                ([f"no {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(extra)}"] if extra else [])))
        state = cls(**data)
        wrong = next((name for name, ok in _field_checks(state) if not ok()), None)
        if wrong is not None:
            raise InputError(f"not an early-stopping state (a count, flag, value or statistic is out of place): "
                             f"{wrong} {shown(getattr(state, wrong))}")
        return state


#: the fields added since states were first saved: a state without them is read with them None
ADDED = ("measure", "statistics", "gold")


def restored(data: Any, scorer: Scorer, key: str, ids: Sequence[str], step: Optional[int], floor: bool,
             gold: Optional[str] = None) -> State:
    """The saved state ``data`` (:meth:`State.to_dict`), checked against itself and this run: its
    statistics are of ``scorer``'s measure ``key`` (options and layout) and of the prompts ``ids``,
    and give its values; its counts lie within the validations it has seen, its steps from 0 to the
    current ``step`` (the Trainer's global step; None where the count may restart, as fairseq's
    update count does when a resume does not restore the optimizer state). ``floor``: the rule
    warms up against the first validation's statistics; ``gold``: this run's gold digest
    (:meth:`~nbest_eval.data.Gold.digest`, of the validated prompts), which a state that records
    one must have (the same ids with other translations give other statistics). InputError names
    the first thing wrong. A state saved before states recorded their measure, layout and gold gets
    this run's, once its statistics fit the layout and give its values (its measure's options and
    its gold's translations cannot be checked)."""
    state = State.from_dict(data)
    if not state.seen:
        if state != State():
            raise InputError("not an early-stopping state: no validation seen, yet something counted or kept")
        return state
    restricted = scorer.restricted(key)
    measure, layout = measure_name(scorer, key), list(restricted.stat_names)
    problem = _bounds_problem(state, step) or _recorded_problem(state, measure, layout, ids, gold) or \
        _rows_problem(state, restricted, key, ids, floor)
    if problem:
        raise InputError(problem)
    return replace(state, measure=measure, statistics=layout, gold=gold or state.gold)


def measure_name(scorer: Scorer, key: str) -> str:
    """The measure ``key`` with the options its statistics depend on, as signatures write them
    (``wf1|trunc:top1``): what a state's statistics are of."""
    metric = next(m for m in scorer.metrics if m.key == key)
    return "|".join([key, *(f"{name}:{value}" for name, value in metric.options.items())])


def prompts_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


# -- checks -----------------------------------------------------------------------------------------

def _field_checks(state: State) -> List[Tuple[str, Callable[[], bool]]]:
    """Each field's own check, in order, run lazily: a check may rely on the ones before it."""
    def count(name: str, optional: bool = True) -> Callable[[], bool]:
        value = getattr(state, name)
        return lambda: value is None and optional or _int(value) and 0 <= value <= state.seen

    def optional(name: str, check: Callable[[Any], bool]) -> Callable[[], bool]:
        return lambda: getattr(state, name) is None or check(getattr(state, name))

    return [("seen", lambda: _int(state.seen) and state.seen >= 0), ("runs", count("runs", False)),
            ("reference", count("reference")), ("kept", count("kept")), ("kept_step", optional("kept_step", _int)),
            ("warming_up", lambda: isinstance(state.warming_up, bool)),
            ("stopped", lambda: isinstance(state.stopped, bool)),
            ("reference_value", optional("reference_value", finite_number)),
            ("kept_value", optional("kept_value", finite_number)),
            ("reference_rows", optional("reference_rows", _matrix)), ("floor_rows", optional("floor_rows", _matrix)),
            ("prompts", optional("prompts", lambda v: isinstance(v, str))),
            ("measure", optional("measure", lambda v: isinstance(v, str))),
            ("gold", optional("gold", lambda v: isinstance(v, str))),
            ("statistics", optional("statistics", lambda v: isinstance(v, list) and
                                    all(isinstance(n, str) for n in v)))]


#: the largest step a counter of training holds (an int64), the bound where the current step is unknown
MAX_STEP = 2 ** 63 - 1


def _bounds_problem(state: State, step: Optional[int]) -> Optional[str]:
    """What in a state that has seen validations lies outside its bounds (``step``: the current one,
    None: unknown)."""
    # a validation a step at most (and one at step 0: the Trainer's eval_on_start)
    if step is not None and state.seen > step + 1:
        return f"seen {shown(state.seen)} validations by step {step}"
    if state.reference is None or state.kept is None or not state.reference <= state.kept < state.seen:
        return (f"reference {state.reference} and kept {state.kept} are not 0 <= reference <= kept < seen "
                f"({state.seen})")
    after = state.seen - 1 - state.reference  # runs count validations after the reference
    if state.runs > after:
        return f"runs {state.runs} are more than the {after} validation(s) after the reference"
    if state.kept_step is None or not 0 <= state.kept_step <= (MAX_STEP if step is None else step):
        bound = f"from 0 to {MAX_STEP}" if step is None else f"from 0 to the current {step}"
        return f"kept_step {shown(state.kept_step)} is not a step {bound}"
    if state.warming_up and (state.runs or state.stopped):
        return "runs counted or stopped while warming up"
    if state.reference_rows is None:
        return "no statistics of the reference validation (reference_rows)"
    return None


def _recorded_problem(state: State, measure: str, layout: List[str], ids: Sequence[str],
                      gold: Optional[str]) -> Optional[str]:
    """Whether the state's statistics are of this measure, layout, prompts and gold, as far as it records."""
    if state.measure is not None and state.measure != measure:
        return f"its statistics are of {state.measure}, not {measure}"
    if state.statistics is not None and state.statistics != layout:
        return f"its statistics are {', '.join(state.statistics)}, not {measure}'s {', '.join(layout)}"
    if state.prompts != prompts_digest(ids):
        return "its statistics are of other prompts"
    if None not in (state.gold, gold) and state.gold != gold:
        return "its statistics are of another gold (the same prompt ids, other translations or weights)"
    return None


def _rows_problem(state: State, scorer: Scorer, key: str, ids: Sequence[str], floor: bool) -> Optional[str]:
    """Whether the state's statistics fit the layout and give its values, and its floor its warm-up."""
    if state.floor_rows is not None and not state.warming_up:
        return "floor_rows kept after warm-up"
    if floor and state.warming_up and state.floor_rows is None:
        return "warming up until significantly better than the first validation, without its statistics (floor_rows)"
    shape = (len(ids), len(scorer.stat_names))
    for name in ("reference_rows", "floor_rows"):
        rows = getattr(state, name)
        found = (len(rows), len(rows[0]) if rows else shape[1]) if rows is not None else shape
        if found != shape:
            return f"{name} are {found[0]} x {found[1]}, not {shape[0]} prompts x {shape[1]} statistics"
    value = PerPrompt.from_matrix(scorer, ids, np.array(state.reference_rows, dtype=float)).scores()[key]
    if not _same(value, state.reference_value):
        return f"reference_value {state.reference_value} is not its statistics' {key}, {value}"
    if not _same(state.kept_value, state.reference_value):  # the kept validation is the reference or tied with it
        return f"kept_value {state.kept_value} is not the reference's value {state.reference_value}"
    return None


def shown(value: Any) -> str:
    """``value`` as a message shows it: a long one cut, with its length (a 400-digit integer)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number that a float holds (a 400-digit integer is none, nor NaN)."""
    if _int(value):
        return abs(value) <= sys.float_info.max
    return isinstance(value, float) and math.isfinite(value)


def _matrix(rows: Any) -> bool:
    return isinstance(rows, list) and all(isinstance(r, list) and all(map(finite_number, r)) for r in rows) and \
        len({len(r) for r in rows}) <= 1


def _same(a: Optional[float], b: Optional[float]) -> bool:
    """Both undefined, or equal but for rounding (the same sums added in another order)."""
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
