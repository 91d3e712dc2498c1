"""fairseq checkpoints through torch's safe loader (``weights_only``), with no process-wide opt-out.

Under torch >= 2.6, ``torch.load`` unpickles only tensors, containers and plain values unless
other types are allowlisted. fairseq checkpoints also pickle an ``argparse.Namespace`` (the run's
arguments), numpy values and omegaconf configs (:func:`safe_globals`).
:func:`allow_fairseq_checkpoints` adds exactly those types, none of which runs code when unpickled,
to torch's allowlist (``torch.serialization.add_safe_globals``): fairseq's own ``torch.load`` calls
(resume, ``load_model_ensemble_and_task``) then accept fairseq checkpoints while still refusing
anything that would run code, such as a pickled shell command.

:func:`trusted` (``nbest-eval select --trust-checkpoints``; in training ``--nbest-trust-checkpoints``,
:func:`trust_checkpoints_in_this_run`) is the explicit opt-in for checkpoints
that hold other types: while it lasts, they load with full unpickling, which can run any code
inside them, so use it only for files you made.
"""

import argparse
import contextlib
import logging
import os
import pickle
from typing import Any, Dict, Iterator, List

import torch

from ..data import InputError

logger = logging.getLogger(__name__)

#: numeric numpy dtypes (never the object dtype, whose arrays hold pickles)
NUMPY_DTYPES = ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")
#: torch's RuntimeError messages for a file that is no (or a damaged) checkpoint
DAMAGED = ("PytorchStreamReader", "unexpected EOF", "inline_container", "magic number")
#: torch reads it at every load that does not pass ``weights_only``
FULL_LOAD = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


def safe_globals() -> List[Any]:
    """The types fairseq checkpoints hold beyond what ``weights_only`` loads anyway.

    - ``argparse.Namespace``: the run's arguments (``args``, or ``cfg.model`` of legacy architectures);
    - numpy arrays, scalars and numeric dtypes: meters and metrics that log numpy values;
    - omegaconf's ``DictConfig`` and what it pickles, and fairseq's ``_TensorPlaceholder`` (a frozen
      dataclass holding an index): fairseq's distributed resume sends the loaded state (its config
      now a ``DictConfig``, its tensors replaced by placeholders) to the other ranks through ``torch.load``.
    """
    import collections
    import typing

    import numpy
    from fairseq.distributed.utils import _TensorPlaceholder
    from omegaconf import DictConfig, ListConfig
    from omegaconf.base import ContainerMetadata, Metadata
    from omegaconf.nodes import AnyNode

    try:  # where numpy pickles its arrays and scalars: numpy._core in numpy 2, numpy.core in numpy 1
        from numpy._core import multiarray
    except ImportError:
        from numpy.core import multiarray
    numpy_types: List[Any] = [numpy.ndarray, numpy.dtype]
    numpy_types += [type(numpy.dtype(code)) for code in NUMPY_DTYPES]
    for function in (multiarray._reconstruct, multiarray.scalar):  # named as the file's numpy named them
        numpy_types += [(function, f"{module}.{function.__name__}")
                        for module in ("numpy.core.multiarray", "numpy._core.multiarray")]
    omegaconf_types = [DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode, (typing.Any, "typing.Any"),
                       collections.defaultdict, dict, list, int]
    return [argparse.Namespace, _TensorPlaceholder] + numpy_types + omegaconf_types


def allow_fairseq_checkpoints() -> None:
    """Add :func:`safe_globals` to torch's allowlist (idempotent)."""
    torch.serialization.add_safe_globals(safe_globals())


def load_state(path: str, trust: bool = False) -> Dict[str, Any]:
    """A checkpoint's state dict on the CPU, loaded safely (``trust``: fully, see :func:`trusted`);
    problems are :class:`InputError` naming the file."""
    # an explicit weights_only=True would win over trusted()'s environment variable
    safe = {} if trust else {"weights_only": True}
    with refuse_unsafe(path), trusted(trust):
        try:
            return torch.load(path, map_location="cpu", **safe)
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror or _first_line(err)}", path) from None


def trust_checkpoints_in_this_run() -> None:
    """``--nbest-trust-checkpoints``: fairseq-train loads checkpoints where no context can reach, so
    the explicit opt-in lasts for the training process (and is logged)."""
    logger.warning("translation_nbest: --nbest-trust-checkpoints: checkpoints load with full unpickling in this "
                   "run, which runs any code stored in them")
    os.environ[FULL_LOAD] = "1"


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
        if "Weights only load failed" in message and "GLOBAL" in message:
            # torch's message: a paragraph about weights_only, then what it refused
            refused = next(line.strip() for line in message.splitlines() if "GLOBAL" in line)
            raise InputError(f"refusing to load this checkpoint: it holds something that torch's safe loader does "
                             f"not allow ({refused}), and loading it could run code. If you made this file "
                             f"yourself, --trust-checkpoints (fairseq-train: --nbest-trust-checkpoints) loads it fully",
                             path) from None
        raise InputError("not a checkpoint (torch cannot read it as one)", path) from None
    except EOFError:
        raise InputError("not a checkpoint: the file ends early (truncated?)", path) from None
    except KeyError as err:  # torch's legacy format reader on other files, or a .pt file that is no fairseq's
        raise InputError(f"not a fairseq checkpoint (no {err} in it)", path) from None
    except RuntimeError as err:
        if not any(sign in str(err) for sign in DAMAGED):
            raise
        raise InputError(f"not a checkpoint, or a damaged one ({_first_line(err).split('. ')[0]})", path) from None


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__
