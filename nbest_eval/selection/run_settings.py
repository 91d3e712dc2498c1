"""The settings a checkpoint is generated and scored with, as its training run recorded them.

A training run validates with settings (beam, length bounds, BPE removal, the prompts, the scorer's
options...) that it records: the fairseq plugin in each checkpoint's task config, the Hugging Face
callback in a file beside each checkpoint. Re-scoring a checkpoint with other settings gives other
numbers, so ``nbest-eval select`` takes the recorded ones, and an option given overrides them (and
says so). :func:`resolve` is that rule, for any set of checkpoints:

- an option given wins; where it differs from what a checkpoint recorded, a note says so;
- else the value every checkpoint recorded;
- checkpoints that recorded different values are refused, naming two of them and the option that
  settles it;
- a setting that no option gives and some checkpoint did not record (an older version, another
  task) is refused naming the option, unless it has a default that is no guess (``nbest_size``:
  the beam; a parameter the metrics added later: its default, which keeps the earlier values).

Records and results map setting names (the ``Setting`` names below) to plain JSON values.
Imports no framework.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ..data import InputError
from ..metrics import PARAMS
from ..training.generation import DECLARED

#: an option's value that means "none" (no BPE removal, every prompt), where None means "not given"
NONE = "none"


@dataclass(frozen=True)
class Setting:
    """One recorded setting: ``name`` is its key in records and select's ``--name-with-dashes``
    option; ``required``: refused when unknown (else ``default``); ``group``: settings of one group
    exclude each other, so giving one sets the others to their defaults."""

    name: str
    required: bool = True
    default: Any = None
    group: Optional[str] = None
    #: False: no option sets it (checkpoints that disagree are scored by separate runs)
    settable: bool = True
    #: :data:`NONE` is one of its values (sacrebleu's tokenizer and smoothing "none"), not "no value"
    none_is_a_value: bool = False

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


#: what changes the lists of any checkpoint: their beam search and the n-best length (a setting whose
#: declared default is None follows from the others, so a record without it needs no guess)
GENERATION = tuple(Setting(s.name, required=s.default is not None) for s in DECLARED.values())
#: which prompts a run validates on, and how sources find them
PROMPTS = (Setting("prompt_map"), Setting("max_prompts", required=False))
#: fairseq: text post-processing and the split
FAIRSEQ = GENERATION + (Setting("remove_bpe"), Setting("detok")) + PROMPTS + (
    Setting("subset", required=False, default="valid"),)
#: the scorer: its metrics (columns only) and the options its values depend on
SCORER = (Setting("metrics", required=False),) + tuple(
    Setting(p.name, required=False, default=p.default, group=p.exclusive, none_is_a_value=NONE in (p.choices or ()))
    for p in PARAMS.values())


@dataclass
class Resolved:
    """The settings to use (by name), the notes on options that override records, and the checkpoint
    whose record the settings came from (None: none recorded any)."""

    values: Dict[str, Any]
    notes: List[str]
    source: Optional[str]


Record = Tuple[str, Optional[Mapping[str, Any]]]  # (checkpoint, its settings; None: it recorded none)


def resolve(settings: Sequence[Setting], records: Sequence[Record], given: Mapping[str, Any],
            why_missing: str = "") -> Resolved:
    """The value of each of ``settings`` for checkpoints with ``records``, options ``given`` (name ->
    value; None: not given; :data:`NONE`: none) winning. InputError when a setting is unknown
    (naming every option to pass; ``why_missing`` says why records lack settings) or checkpoints
    disagree."""
    given = _implied(settings, given)
    values, notes, missing = {}, [], []
    for setting in settings:
        value = given.get(setting.name)
        found = [(path, record[setting.name]) for path, record in records
                 if record is not None and setting.name in record]
        if value is not None:
            values[setting.name] = None if value == NONE and not setting.none_is_a_value else value
            if setting.name != "metrics":  # columns, not numbers
                notes += _override(setting, values[setting.name], found)
            continue
        distinct = _distinct(found)
        if len(distinct) > 1 and setting.name != "metrics":
            (a, va), (b, vb) = distinct[:2]
            remedy = f"pass {setting.option} to generate and score every checkpoint alike" if setting.settable \
                else "score them in separate runs"
            raise InputError(f"{a} and {b} recorded different {setting.name} ({_shown(va):.80} and {_shown(vb):.80}): "
                             f"{remedy}")
        if len(found) == len(records) and found:
            values[setting.name] = _union([v for _, v in distinct]) if setting.name == "metrics" else distinct[0][1]
        elif setting.required:
            lacking = next(path for path, record in records if record is None or setting.name not in record)
            missing.append((lacking, setting.option))
        else:
            values[setting.name] = setting.default
    if missing:
        options = ", ".join(option for _, option in missing)
        raise InputError(f"{missing[0][0]} records no value for {options}{why_missing}: pass {options} as the run "
                         f"validated ({NONE} where it had none), rather than have select guess")
    source = next((path for path, record in records if record is not None), None)
    return Resolved(values, notes, source)


def describe(values: Mapping[str, Any], settings: Sequence[Setting], given: Collection[str] = ()) -> str:
    """``beam 16 (given), max_len_b 5, remove_bpe sentencepiece``: the settings as they are used, those
    named in ``given`` marked as coming from an option."""
    return ", ".join(f"{s.name} {_shown(values[s.name])}{' (given)' if s.name in given else ''}"
                     for s in settings if s.name in values)


def _implied(settings: Sequence[Setting], given: Mapping[str, Any]) -> Dict[str, Any]:
    """``given``, plus the defaults of the other settings in the group of a setting given."""
    out = dict(given)
    groups = {s.group for s in settings if s.group and given.get(s.name) is not None}
    for setting in settings:
        if setting.group in groups and out.get(setting.name) is None:
            out[setting.name] = NONE if setting.default is None else setting.default
    return out


def _override(setting: Setting, value: Any, found: Sequence[Tuple[str, Any]]) -> List[str]:
    differ = [(path, v) for path, v in _distinct(found) if v != value]
    if not differ:
        return []
    if len(_distinct(found)) == 1:
        return [f"{setting.option} {_shown(value)} overrides the run's {_shown(differ[0][1])}"]
    runs = " and ".join(f"{_shown(v)} ({path})" for path, v in differ[:2])
    return [f"{setting.option} {_shown(value)} overrides the runs' {runs}"]


def _distinct(found: Sequence[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """The first checkpoint recording each distinct value."""
    seen: Dict[str, Tuple[str, Any]] = {}
    for path, value in found:
        seen.setdefault(json.dumps(value, sort_keys=True), (path, value))
    return list(seen.values())


def _union(lists: Sequence[Sequence[str]]) -> List[str]:
    """Every run's metrics, in first-seen order: metrics add columns, never change a number."""
    return list(dict.fromkeys(key for keys in lists for key in keys))


#: a list setting longer than this (the prompts a run validated on) is shown by its first items and size
SHOWN_ITEMS = 8


def _shown(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, (list, tuple)):
        if len(value) > SHOWN_ITEMS:
            return ",".join(map(str, value[:2])) + f",... ({len(value)} in all)"
        return ",".join(map(str, value))
    return str(value)
