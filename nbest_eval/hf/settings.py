"""What a checkpoint's n-best validation was: the settings file the callback writes beside it.

:class:`~nbest_eval.hf.callback.NBestEvalCallback` writes :data:`SETTINGS_FILE` into every checkpoint
directory the Trainer saves (rank 0 only, all or nothing), so that ``nbest-eval select --hf`` can
score a checkpoint as training scored it without being told how::

    {"format": 1, "nbest_eval": "0.4.0",
     "gold": {"path": "/abs/valid.gold.txt", "digest": "<sha256 of the whole gold>"},
     "prompts": ["prompt_...", ...],              # the prompts it validated on, in its order
     "evaluator": {"num_beams": 8, "max_new_tokens": 64, "metrics": ["map", ...], ...},
     "unrecorded": ["preprocess"]}                # settings set to something JSON cannot hold

``evaluator`` holds every :data:`~nbest_eval.hf.evaluator.SETTINGS` whose value is a JSON value (the
n-best size and the scorer's options resolved); ``unrecorded`` names those set to anything else (a
``preprocess`` function, a ``generation_kwargs`` holding an object), so that a reader can refuse to
guess them. A setting in neither (one added after the file was written) had its default.
:func:`evaluator_from_settings` rebuilds the evaluator and refuses when one is missing.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..data import Gold, InputError
from ..files.output import PathLike, write_text
from ..formats.common import open_regular
from ..version import __version__
from .evaluator import SETTINGS, NBestEvaluator

#: the settings file in a checkpoint directory (``nbest_eval-{name}.json`` for a named callback)
SETTINGS_FILE = "nbest_eval.json"
FORMAT = 1
#: no settings file is larger (a million prompt ids fit)
MAX_BYTES = 64 << 20
#: how the recorded prompts are chosen; rebuilding from the recorded prompts must not choose again
_CHOOSING = ("prompt_map", "max_prompts", "subset_size", "subset_seed")
_KEYS = {"format", "nbest_eval", "gold", "prompts", "evaluator", "unrecorded"}


def settings_path(checkpoint_dir: PathLike, name: Optional[str] = None) -> Path:
    """Where the settings of the n-best callback called ``name`` are in ``checkpoint_dir``."""
    return Path(checkpoint_dir) / (SETTINGS_FILE if not name else f"nbest_eval-{name}.json")


def settings_of(evaluator: NBestEvaluator) -> Dict[str, Any]:
    """The record of ``evaluator`` (see the module docstring)."""
    recorded = {k: v for k, v in evaluator.settings.items() if _is_json(v)}
    gold = evaluator.full_gold
    return {"format": FORMAT, "nbest_eval": __version__,
            "gold": {"path": None if gold.path is None else os.path.abspath(gold.path), "digest": gold.digest()},
            "prompts": [p.id for p in evaluator.prompts], "evaluator": recorded,
            "unrecorded": [k for k in SETTINGS if k not in recorded]}


def save_settings(checkpoint_dir: PathLike, evaluator: NBestEvaluator, name: Optional[str] = None) -> Path:
    """Write ``evaluator``'s record into ``checkpoint_dir`` (replacing an earlier one), all or nothing."""
    path = settings_path(checkpoint_dir, name)
    write_text(path, json.dumps(settings_of(evaluator), indent=1, allow_nan=False) + "\n", overwrite=True)
    return path


def read_settings(checkpoint_dir: PathLike, name: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The record in ``checkpoint_dir`` (None when it has none). It is input: anything but a record
    of this format (too large, not JSON, an unknown setting, a value of the wrong kind) is an
    :class:`~nbest_eval.data.InputError` naming the file."""
    path = settings_path(checkpoint_dir, name)
    if not os.path.lexists(path):
        return None
    with open_regular(path, "n-best settings are a file") as file:
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise InputError(f"not n-best settings (over {MAX_BYTES} bytes)", os.fspath(path))
    try:
        record = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise InputError(f"not readable n-best settings ({why})", os.fspath(path)) from None
    problem = _problem(record)
    if problem:
        raise InputError(f"not n-best settings of format {FORMAT} ({problem})", os.fspath(path))
    return record


def evaluator_from_settings(settings: Mapping[str, Any], gold: Gold, tokenizer: Any = None, *,
                            source: Optional[PathLike] = None, **overrides: Any) -> NBestEvaluator:
    """An evaluator that scores the recorded prompts of ``gold`` with the recorded settings, except
    ``overrides`` (NBestEvaluator's keyword arguments). A setting the record could not hold must be
    overridden; a recorded prompt missing from ``gold``, or a value the evaluator refuses, is an
    :class:`~nbest_eval.data.InputError` naming ``source`` (the settings file)."""
    where = None if source is None else os.fspath(source)
    missing = [k for k in settings["unrecorded"] if k not in overrides]
    if missing:
        raise InputError(f"the run set {', '.join(missing)} to something a settings file cannot hold; "
                         f"give it again", where)
    absent = next((i for i in settings["prompts"] if i not in gold), None)
    if absent is not None:
        raise InputError(f"the run validated on prompt {absent!r}, which the gold {gold.path or ''} does not "
                         f"have: give the gold it was trained with", where)
    options = {k: v for k, v in {**settings["evaluator"], **overrides}.items() if k not in _CHOOSING}
    chosen = Gold([gold[i] for i in settings["prompts"]], gold.path)
    try:
        return NBestEvaluator(chosen, tokenizer, **options)
    except (TypeError, ValueError) as err:  # InputError is a ValueError: a recorded value it refuses
        raise InputError(f"unusable n-best settings: {err}", where) from None


# -- checks -------------------------------------------------------------------------------------


def _is_json(value: Any) -> bool:
    """Whether ``value`` is a JSON value that reads back equal (no tuple, no non-text key, finite)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(_is_json, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON holds")


def _problem(record: Any) -> Optional[str]:
    """What makes ``record`` no settings record, or None."""
    if not isinstance(record, dict) or set(record) != _KEYS:
        return f"an object of the keys {', '.join(sorted(_KEYS))}"
    if record["format"] != FORMAT:
        return f"format {record['format']!r:.20}"
    gold = record["gold"]
    if not isinstance(gold, dict) or set(gold) != {"path", "digest"} or \
            not all(v is None or isinstance(v, str) for v in gold.values()):
        return "gold: an object of path and digest"
    prompts: List[Any] = record["prompts"]
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts) or \
            len(set(prompts)) != len(prompts):
        return "prompts: a list of distinct prompt ids"
    evaluator, unrecorded = record["evaluator"], record["unrecorded"]
    if not isinstance(evaluator, dict) or not isinstance(unrecorded, list):
        return "evaluator: an object, unrecorded: a list"
    unknown = next((k for k in [*evaluator, *unrecorded] if k not in SETTINGS), None)
    if unknown is not None:
        return f"{unknown!r:.40} is no setting of NBestEvaluator"
    if set(evaluator) & set(unrecorded):
        return "a setting both recorded and unrecorded"
    return None
