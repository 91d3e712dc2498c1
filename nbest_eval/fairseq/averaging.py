"""Average fairseq checkpoints (``nbest-eval select --fairseq-data ... --average K``) as fairseq's own
``scripts/average_checkpoints.py`` does, so that the result is what fairseq users know: the model's
floating-point parameters summed (float16 ones as float32) and divided by their number, every other
field (``cfg``, ``args``, ``extra_state``, the optimizer state) the first checkpoint's. Integer and
boolean buffers (step counters, masks) are no quantity to average: they are the first checkpoint's
too (fairseq's script floor-divides their sum), and a parameter that is floating-point in one
checkpoint and not in another is refused, naming it, before anything is written.
The first checkpoint should be the best one (:func:`nbest_eval.selection.averaging.best_k` orders them so).
The result loads wherever a checkpoint does: ``fairseq-generate --path``, ``--restore-file``
(resuming from the first checkpoint's optimizer state, as with fairseq's script), ``nbest-eval select``.

Unlike fairseq's script, every checkpoint is loaded with torch's safe loader
(:mod:`~nbest_eval.fairseq.safe_load`), checkpoints of different architectures are refused rather
than averaged into nonsense, and the output is written all or nothing, never over an input.
"""

from __future__ import annotations

import argparse
import collections
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Set, Tuple

import torch

from ..data import InputError
from ..files.output import PathLike, write_file
from ..selection.averaging import (
    check_request,
    check_same_fields,
    check_same_parameters,
    different,
    not_architecture,
    summing_order,
)
from .safe_load import load_state

#: model options that do not change what the parameters compute (beyond :func:`not_architecture`'s)
TRAINING_ONLY = frozenset({"checkpoint_activations", "offload_activations", "min_params_to_wrap", "export",
                           "encoder_embed_path", "decoder_embed_path", "quant_noise_pq", "quant_noise_pq_block_size",
                           "quant_noise_scalar"})


def average_checkpoints(paths: Sequence[PathLike], out: PathLike, *, trust: bool = False,
                        overwrite: bool = False) -> str:
    """Write the average of the checkpoint files ``paths`` to ``out`` and return ``out``.

    ``trust``: load checkpoints that the safe loader refuses, with full unpickling (select's
    ``--trust-checkpoints``). Errors (:class:`~nbest_eval.data.InputError`, before anything is
    written): no paths, a missing or repeated one, a file that is no fairseq checkpoint or would run
    code, checkpoints of different architectures (naming both and what differs), ``out`` an input
    (even with ``overwrite``), an existing ``out`` without ``overwrite``.
    Checkpoints are loaded one at a time: memory holds the first, the sum and one more.
    """
    paths = check_request(paths, out, overwrite)
    first = _load(paths[0], trust)
    architecture, shapes = model_architecture(first), _shapes(first["model"])
    kinds = {name: _kind(param) for name, param in first["model"].items()}
    total = collections.OrderedDict((name, torch.zeros_like(_widened(p)) if p.is_floating_point() else p.clone())
                                    for name, p in first["model"].items())
    for i in summing_order(paths):  # the same checkpoints give the same bits whichever is named first
        state = first if i == 0 else _load(paths[i], trust)
        check_same_fields(paths[0], architecture, paths[i], model_architecture(state))
        check_same_parameters(paths[0], shapes, paths[i], _shapes(state["model"]))
        for name, param in state["model"].items():
            if _kind(param) != kinds[name]:
                raise different(paths[0], paths[i], f"its {name} is {_kind(param)}, {kinds[name]} in {paths[0]}")
            if param.is_floating_point():
                total[name] += _widened(param)
        del state
    first["model"] = _divided(total, len(paths))
    write_file(out, lambda partial: torch.save(first, partial), overwrite)
    return os.fspath(out)


def model_architecture(state: Mapping[str, Any]) -> Dict[str, Any]:
    """The options that decide what a checkpoint's parameters compute: its architecture's name and
    the options that architecture defines (fairseq's model registry), less :data:`TRAINING_ONLY`
    and dropout rates. Legacy architectures keep every run option in ``cfg.model``: only the model's are kept."""
    options = _model_options(state)
    arch = options.get("arch") or options.get("_name")
    own = _architecture_options(arch)
    kept = {name: value for name, value in options.items()
            if own is not None and name in own and not not_architecture(name, TRAINING_ONLY)}
    return {"arch": arch, **kept}


def _model_options(state: Mapping[str, Any]) -> Dict[str, Any]:
    cfg = state.get("cfg")
    model = cfg.get("model") if isinstance(cfg, Mapping) else None
    if model is None:  # checkpoints from before fairseq's hydra configs: the run's args
        model = state.get("args")
    if isinstance(model, argparse.Namespace):
        return vars(model)
    return dict(model) if isinstance(model, Mapping) else {}


def _architecture_options(arch: Optional[str]) -> Optional[Set[str]]:
    """The options an architecture's model class defines; None for one fairseq does not know (a
    model of a --user-dir not imported here): then only the name and the parameters are compared."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    model = ARCH_MODEL_REGISTRY.get(arch)
    if model is None:
        return None
    parser = argparse.ArgumentParser(add_help=False)
    model.add_args(parser)
    return {action.dest for action in parser._actions}


def _load(path: str, trust: bool) -> Dict[str, Any]:
    state = load_state(path, trust)
    model = state.get("model") if isinstance(state, dict) else None
    if not isinstance(model, Mapping) or not model:
        raise InputError("not a fairseq checkpoint (no model parameters in it)", path)
    not_tensor = next((name for name, value in model.items() if not isinstance(value, torch.Tensor)), None)
    if not_tensor is not None:
        raise InputError(f"not a fairseq checkpoint: its model entry {not_tensor} is no tensor", path)
    return state


def _shapes(model: Mapping[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
    return {name: tuple(param.shape) for name, param in model.items()}


def _widened(param: torch.Tensor) -> torch.Tensor:
    """fairseq's script sums float16 parameters as float32 (and leaves them so), all others in their dtype."""
    return param.float() if param.dtype == torch.float16 else param


def _kind(param: torch.Tensor) -> str:
    """A parameter's dtype as far as averaging goes: any floating-point one is summed alike."""
    return "floating-point" if param.is_floating_point() else str(param.dtype).replace("torch.", "")


def _divided(total: Dict[str, torch.Tensor], count: int) -> Dict[str, torch.Tensor]:
    """The floating-point sums divided by ``count``; the others are the first checkpoint's, as they were."""
    for param in total.values():
        if param.is_floating_point():
            param.div_(count)
    return total
