"""Averaging the parameters of the best checkpoints (``nbest-eval select --average K --average-out PATH``):
what the fairseq (:mod:`nbest_eval.fairseq.averaging`) and Hugging Face (:mod:`nbest_eval.hf.averaging`)
versions share, so that both choose, refuse and explain alike:

- :func:`best_k`: the K best checkpoints by the selection measure, best first;
- :func:`check_request`: refusals made before anything is loaded (checkpoints that are missing or
  listed twice, an output that :mod:`nbest_eval.files.writable` refuses), since averaging large
  checkpoints takes a while;
- :func:`check_same_fields` / :func:`check_same_parameters`: two checkpoints that are not one
  architecture are refused with an error naming both and what differs;
- :func:`summing_order`: floating-point sums depend on their order, so checkpoints are summed in one
  order, their paths', not in the order given (the best first), which differs between requests.

Imports no framework.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Collection, List, Mapping, Optional, Sequence, Tuple

from ..data import InputError
from ..files.writable import PathLike, check_model_directory, check_outputs, file_identity
from .choosing import k_best

#: how refusals of the output name it
ROLE = "the averaged checkpoint"
_MISSING = object()


def best_k(paths: Sequence[str], values: Sequence[Optional[float]], k: int, maximize: bool = True) -> List[str]:
    """The ``k`` checkpoints of ``paths`` with the best ``values``, best first: the first one's
    settings are those an average keeps (:func:`~nbest_eval.selection.k_best`)."""
    if k < 1:
        raise InputError(f"--average takes the number of checkpoints to average (>= 1), got {k}")
    try:
        return [paths[i] for i in k_best(values, k, maximize)]
    except InputError as err:
        raise InputError(f"--average {k}: {err}") from None


def summing_order(paths: Sequence[str]) -> List[int]:
    """The indices of ``paths`` in the order to sum them: by absolute path, so that the same
    checkpoints averaged in any order give the same bits (under bf16 a last-bit difference can change
    the lists)."""
    return sorted(range(len(paths)), key=lambda i: os.path.abspath(paths[i]))


def check_request(paths: Sequence[PathLike], out: PathLike, overwrite: bool, directory: bool = False) -> List[str]:
    """``paths`` as strings, once the request is known to be doable: at least one checkpoint, each
    existing and listed once (a second name of one file would weigh it twice), and an output that
    may be written: never an input (even with ``overwrite``), an existing one only with ``overwrite``.
    ``directory``: the checkpoints and the output are (model) directories."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise InputError("no checkpoints to average")
    seen: dict = {}
    for path in paths:
        if not (os.path.isdir(path) if directory else os.path.isfile(path)):
            raise InputError(f"no such checkpoint {_kind(directory)}", path)
        first = seen.setdefault(file_identity(path), path)
        if paths.count(path) > 1 or first != path:
            again = "listed twice" if paths.count(path) > 1 else f"the same {_kind(directory)} as {first}"
            raise InputError(f"{again}: it would weigh twice in the average", path)
    if directory:
        check_model_directory(ROLE, out, paths, overwrite)
    else:
        check_outputs({ROLE: out}, paths, overwrite)
    return paths


def check_same_fields(first: str, reference: Mapping[str, Any], path: str, fields: Mapping[str, Any],
                      ignore: Callable[[str], bool] = lambda name: False) -> None:
    """Refuse ``path`` unless its architecture ``fields`` equal those of ``first`` (``reference``),
    all but the ``ignore``\\d ones, compared in ``reference``'s order (put the telling ones first)."""
    for name in list(reference) + [n for n in fields if n not in reference]:
        if ignore(name):
            continue
        ours, theirs = fields.get(name, _MISSING), reference.get(name, _MISSING)
        if ours != theirs:
            raise different(first, path, f"its {name} is {_show(ours)}, {_show(theirs)} in {first}")


def check_same_parameters(first: str, reference: Mapping[str, Tuple[int, ...]], path: str,
                          shapes: Mapping[str, Tuple[int, ...]]) -> None:
    """Refuse ``path`` unless its parameters have the names and shapes (name -> shape) of ``first``'s."""
    missing = [name for name in reference if name not in shapes]
    if missing:
        raise different(first, path, f"it has no parameter {_names(missing)}")
    extra = [name for name in shapes if name not in reference]
    if extra:
        raise different(first, path, f"its parameter {_names(extra)} is not in {first}")
    for name, shape in shapes.items():
        if tuple(shape) != tuple(reference[name]):
            raise different(first, path, f"its {name} has shape {list(shape)}, {list(reference[name])} in {first}")


def different(first: str, path: str, what: str) -> InputError:
    return InputError(f"cannot average it with {first}: not the same architecture ({what})", path)


def not_architecture(name: str, extra: Collection[str] = ()) -> bool:
    """Settings that differ between checkpoints of one model without changing what its parameters
    compute at inference: dropout and layer-drop rates (resuming with other rates is common), and ``extra``."""
    return "dropout" in name or "layerdrop" in name or name in extra


def _kind(directory: bool) -> str:
    return "directory" if directory else "file"


def _show(value: Any) -> str:
    return "absent" if value is _MISSING else repr(value)


def _names(names: Sequence[str]) -> str:
    return names[0] + (f" (and {len(names) - 1} more)" if len(names) > 1 else "")
