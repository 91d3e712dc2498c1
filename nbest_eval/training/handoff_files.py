"""The hand-off queue's names and JSON files (:mod:`nbest_eval.training.handoff`): a snapshot's
:class:`Tags` and name, and each file read as input, checked, so that a damaged or foreign file is an
InputError naming it rather than a traceback or a wrong decision."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Optional

from ..data import InputError

FORMAT = 1
FRAMEWORKS = ("fairseq", "hf", "lists")
#: a snapshot's name: seq, generation (resumes), u(pdate) or s(tep), epoch, fairseq's .pt
NAME = re.compile(r"(\d{6})-g(\d+)-(u|s)(\d+)(?:-e(\d+))?(\.pt)?")
#: the largest JSON file read here (a result holds a validation's per-prompt statistics)
MAX_JSON_BYTES = 1 << 28


@dataclass(frozen=True)
class Tags:
    """What names a snapshot: ``seq`` (the queue's order; None until :meth:`Queue.put` gives it),
    the generation ``gen``, the training step (``unit`` "u": fairseq's update, "s": HF's global
    step), the epoch (None where there is none) and the file's suffix."""

    seq: Optional[int]
    gen: int
    step: int
    unit: str = "u"
    epoch: Optional[int] = None
    suffix: str = ""

    @property
    def name(self) -> str:
        epoch = "" if self.epoch is None else f"-e{self.epoch}"
        return f"{self.seq:06d}-g{self.gen}-{self.unit}{self.step}{epoch}{self.suffix}"

    @classmethod
    def parse(cls, name: str) -> Optional[Tags]:
        """The tags of a snapshot's name; None for any other name (a staging folder, a stray file)."""
        found = NAME.fullmatch(name)
        if not found:
            return None
        seq, gen, unit, step, epoch, suffix = found.groups()
        return cls(int(seq), int(gen), int(step), unit, None if epoch is None else int(epoch), suffix or "")

    def as_dict(self) -> Dict[str, Any]:
        return {"seq": self.seq, "gen": self.gen, "update" if self.unit == "u" else "step": self.step,
                "epoch": self.epoch, "name": self.name}


def read_json(path: str, what: str) -> Any:
    """A JSON file written here, read as input: a regular file of at most :data:`MAX_JSON_BYTES`,
    strict JSON; anything else is an InputError naming the file and ``what`` it should be."""
    try:
        if not os.path.isfile(path):  # before opening: a FIFO would block
            raise ValueError("not a regular file")
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size > MAX_JSON_BYTES:
                raise ValueError(f"over {MAX_JSON_BYTES} bytes")
            return json.loads(file.read().decode("utf-8"), parse_constant=_refuse)
    except (ValueError, RecursionError, UnicodeDecodeError) as err:
        raise InputError(f"not a readable {what} ({err})", path) from None
    except OSError as err:
        raise InputError(f"cannot read the {what}: {err.strerror}", path) from None


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def json_text(data: Any) -> str:
    """Strict JSON (no NaN), one key a line: what every file of the queue is written as."""
    return json.dumps(data, allow_nan=False, indent=1) + "\n"


def check_manifest(data: Any, path: str) -> Dict[str, Any]:
    """``data`` if it is a manifest this version writes; else an InputError naming ``path``."""
    def refuse(why: str) -> InputError:
        return InputError(f"not a hand-off manifest of this version: {why}", path)

    if not isinstance(data, dict):
        raise refuse(f"a {type(data).__name__}, not an object")
    if data.get("format") != FORMAT:
        raise refuse(f"format {data.get('format')!r:.40}, not {FORMAT}")
    for name, kind in (("framework", str), ("run_id", str), ("queue", int), ("skip", bool)):
        if not isinstance(data.get(name), kind) or (kind is int and isinstance(data[name], bool)):
            raise refuse(f"{name} is {data.get(name)!r:.40}, not a {kind.__name__}")
    if data["framework"] not in FRAMEWORKS:
        raise refuse(f"framework {data['framework']!r:.40} is none of {', '.join(FRAMEWORKS)}")
    if data["queue"] < 1:
        raise refuse(f"queue {data['queue']} is not >= 1")
    if not isinstance(data.get("stopping"), (dict, type(None))):
        raise refuse("stopping is neither an object nor null")
    return data


def check_verdict(data: Any, path: str) -> Dict[str, Any]:
    """``data`` if it is shaped as :func:`~nbest_eval.training.sidecar.decide_pending` writes a
    verdict (its rule state is checked where it is restored); else an InputError naming ``path``."""
    ints = lambda v: isinstance(v, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in v)  # noqa: E731
    checks = {"decided_through": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
              "decided": ints, "keep": lambda v: v is None or ints(v), "stop": lambda v: isinstance(v, bool),
              "state": lambda v: isinstance(v, (dict, type(None)))}
    wrong = next((name for name, ok in checks.items() if not isinstance(data, dict) or not ok(data.get(name))), None)
    if wrong is not None:
        found = data.get(wrong) if isinstance(data, dict) else data
        raise InputError(f"not a hand-off verdict: {wrong} is {found!r:.40}", path)
    return data


def check_result(data: Any, seq: int, path: str) -> Dict[str, Any]:
    """``data`` if it is a result of snapshot ``seq``: skipped or not evaluated (a reason), or
    evaluated (values and per-prompt statistics, checked where they are used)."""
    if not isinstance(data, dict) or data.get("seq") != seq or not isinstance(data.get("tags"), dict):
        raise InputError(f"not the hand-off result of snapshot {seq}", path)
    if not isinstance(data.get("skipped", data.get("not_evaluated", "")), str) or \
            ("skipped" not in data and "not_evaluated" not in data and
             not (isinstance(data.get("values"), dict) and isinstance(data.get("per_prompt"), dict))):
        raise InputError(f"not the hand-off result of snapshot {seq}: neither evaluated nor a reason why not", path)
    return data
