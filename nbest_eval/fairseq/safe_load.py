"""fairseq checkpoints through torch's safe loader (``weights_only``), with no process-wide opt-out.

Under torch >= 2.6, ``torch.load`` unpickles only tensors, containers and plain values unless
other types are allowlisted. fairseq checkpoints also pickle an ``argparse.Namespace`` (the run's
arguments) and, in some fairseq versions, numpy scalars. :func:`allow_fairseq_checkpoints` adds
exactly those types to torch's allowlist (``torch.serialization.add_safe_globals``): fairseq's own
``torch.load`` calls (resume, ``load_model_ensemble_and_task``) then accept fairseq checkpoints
while still refusing anything that would run code, such as a pickled shell command.

:func:`trusted` (``nbest-eval select --trust-checkpoints``) is the explicit opt-in for checkpoints
that hold other types: while it lasts, they load with full unpickling, which can run any code
inside them, so use it only for files you made.
"""

import argparse
import contextlib
import os
import pickle
from typing import Any, Dict, Iterator, List

import torch

from ..data import InputError

#: torch reads it at every load that does not pass ``weights_only``
FULL_LOAD = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


def safe_globals() -> List[Any]:
    """The types a fairseq checkpoint holds beyond what ``weights_only`` loads anyway."""
    import numpy

    scalar_types = [numpy.dtype, type(numpy.dtype("float64")), type(numpy.dtype("int64")),
                    type(numpy.dtype("float32")), type(numpy.dtype("int32")), type(numpy.dtype("bool"))]
    try:  # where numpy pickles its scalars: numpy._core in numpy 2, numpy.core in numpy 1
        from numpy._core.multiarray import scalar
    except ImportError:
        from numpy.core.multiarray import scalar
    return [argparse.Namespace, scalar] + scalar_types


def allow_fairseq_checkpoints() -> None:
    """Add :func:`safe_globals` to torch's allowlist (idempotent)."""
    torch.serialization.add_safe_globals(safe_globals())


def load_state(path: str) -> Dict[str, Any]:
    """A checkpoint's state dict on the CPU, loaded safely; problems are :class:`InputError` naming the file."""
    with refuse_unsafe(path):
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror or _first_line(err)}", path) from None


@contextlib.contextmanager
def trusted(enabled: bool = True) -> Iterator[None]:
    """While it lasts (and ``enabled``), ``torch.load`` calls that do not say otherwise, fairseq's
    included, unpickle fully. Only for checkpoints the user vouches for."""
    if not enabled:
        yield
        return
    before = os.environ.get(FULL_LOAD)
    os.environ[FULL_LOAD] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[FULL_LOAD]
        else:
            os.environ[FULL_LOAD] = before


@contextlib.contextmanager
def refuse_unsafe(path: str) -> Iterator[None]:
    """Turn torch's refusal of an unsafe checkpoint, or of a file that is no checkpoint, into a clear
    :class:`InputError` naming ``path``."""
    allow_fairseq_checkpoints()
    try:
        yield
    except pickle.UnpicklingError as err:
        message = str(err)
        if "Weights only load failed" in message:
            # torch's message: a paragraph about weights_only, then what it refused
            refused = next((line.strip() for line in message.splitlines() if "GLOBAL" in line or "Unsupported" in line),
                           "a type outside the allowlist")
            raise InputError(f"refusing to load this checkpoint: it holds something that torch's safe loader does "
                             f"not allow ({refused}), and loading it could run code. If you made this file "
                             f"yourself, --trust-checkpoints loads it fully", path) from None
        raise InputError(f"not a checkpoint ({message.splitlines()[0] if message else 'unpickling failed'})",
                         path) from None
    except EOFError:
        raise InputError("not a checkpoint: the file ends early (truncated?)", path) from None
    except RuntimeError as err:
        if "PytorchStreamReader" not in str(err) and "zip archive" not in str(err):
            raise
        raise InputError(f"not a checkpoint ({str(err).splitlines()[0]})", path) from None


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__
