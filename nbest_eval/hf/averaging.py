"""Average Hugging Face checkpoint directories (``nbest-eval select --hf ... --average K``) into a new
model directory that ``from_pretrained`` and ``nbest-eval select --hf`` load.

Only safetensors weights are read (a pickled ``pytorch_model.bin`` could run code when loaded), and
only JSON besides. The result is the first checkpoint (the best one, see
:func:`nbest_eval.selection.averaging.best_k`) with averaged weights: its config.json, generation config and
tokenizer files copied, its weights' names and dtypes kept (ties included: ``save_pretrained``
stores one of a set of tied tensors, so averaging the stored ones averages the set), written as one
``model.safetensors``. Trainer state (optimizer, scheduler, RNG, trainer_state.json) is not copied:
it belongs to the first checkpoint, not to the average.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List, Mapping, Sequence

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

SAFETENSORS, SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")
#: config.json entries that say nothing about what the weights compute
METADATA = frozenset({"_name_or_path", "transformers_version", "_commit_hash", "torch_dtype", "dtype", "use_cache",
                      "output_attentions", "output_hidden_states", "return_dict"})
#: files of a checkpoint directory that are not copied: weights (averaged instead) and training state
NOT_COPIED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".index.json")
NOT_COPIED = frozenset({"trainer_state.json"})


def average_checkpoints(paths: Sequence[PathLike], out: PathLike, *, overwrite: bool = False) -> str:
    """Write the average of the checkpoint directories ``paths`` to the new directory ``out``; return ``out``.

    Floating-point weights are averaged (summed in at least float32, stored in the first's dtype);
    integer and boolean ones must be equal and are kept. Errors
    (:class:`~nbest_eval.data.InputError`, before anything is written): no paths, a missing or
    repeated one, a checkpoint without safetensors weights (one with only ``pytorch_model.bin``
    included: it is not unpickled), different architectures (naming both and what differs),
    ``out`` an input, inside one or holding one (even with ``overwrite``), an existing ``out``
    without ``overwrite``, or with it one that is no model directory. ``out`` is put in place whole
    (a temporary sibling directory renamed), replacing an existing one only with ``overwrite``.
    """
    paths = check_request(paths, out, overwrite, directory=True)
    configs = [read_config(path) for path in paths]
    weight_files = [safetensors_files(path) for path in paths]
    reference = architecture(configs[0])
    for path, config in zip(paths[1:], configs[1:]):
        check_same_fields(paths[0], reference, path, architecture(config), _not_architecture)
    averaged = average_weights(paths, weight_files)
    write_file(out, lambda partial: _write_model(paths[0], averaged, partial), overwrite)
    return os.fspath(out)


def read_config(path: str) -> Dict[str, Any]:
    name = os.path.join(path, "config.json")
    try:
        with open(name, encoding="utf-8") as file:
            config = json.load(file)
    except FileNotFoundError:
        raise InputError("not a model directory: no config.json", path) from None
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read it as JSON ({err})", name) from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise InputError("not a model's config (no model_type)", name)
    return config


def architecture(config: Mapping[str, Any]) -> Dict[str, Any]:
    """config.json's entries, ``model_type`` and ``architectures`` first (the differences that tell most)."""
    return {"model_type": config.get("model_type"), "architectures": config.get("architectures"), **config}


def _not_architecture(name: str) -> bool:
    return not_architecture(name, METADATA)


def safetensors_files(path: str) -> List[str]:
    """The safetensors files holding a checkpoint's weights (several for a sharded one)."""
    index = os.path.join(path, SAFETENSORS_INDEX)
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as file:
                shards = sorted(set(json.load(file)["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise InputError(f"not a safetensors index ({type(err).__name__}: {err})", index) from None
        return [os.path.join(path, os.path.basename(shard)) for shard in shards]
    if os.path.isfile(os.path.join(path, SAFETENSORS)):
        return [os.path.join(path, SAFETENSORS)]
    pickled = next((name for name in PICKLED if os.path.isfile(os.path.join(path, name))), None)
    if pickled:
        raise InputError(f"its weights are only in {pickled}, a pickle, which could run code when loaded; averaging "
                         f"reads safetensors only: re-save the model with save_pretrained(..., "
                         f"safe_serialization=True)", path)
    raise InputError(f"no model weights in it ({SAFETENSORS})", path)


def read_weights(files: Sequence[str]) -> Dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    weights: Dict[str, torch.Tensor] = {}
    for name in files:
        try:
            weights.update(load_file(name, device="cpu"))
        except (OSError, SafetensorError) as err:
            raise InputError(f"cannot read its weights ({err})", name) from None
    return weights


def average_weights(paths: Sequence[str], weight_files: Sequence[Sequence[str]]) -> Dict[str, torch.Tensor]:
    """The element-wise mean of the checkpoints' weights, read one checkpoint at a time and summed in
    the order of their paths (:func:`~nbest_eval.selection.averaging.summing_order`), so that the same
    checkpoints give the same bits whichever is named first; the first decides the stored dtypes."""
    first = read_weights(weight_files[0])
    shapes = {name: tuple(tensor.shape) for name, tensor in first.items()}
    dtypes = {name: tensor.dtype for name, tensor in first.items()}
    total = {name: _accumulator(tensor) for name, tensor in first.items()}
    for i in summing_order(paths):
        weights = first if i == 0 else read_weights(weight_files[i])
        check_same_parameters(paths[0], shapes, paths[i], {name: tuple(t.shape) for name, t in weights.items()})
        for name, tensor in weights.items():
            if tensor.is_floating_point() and dtypes[name].is_floating_point:
                total[name] += tensor
            elif tensor.dtype != dtypes[name] or not torch.equal(total[name], tensor):
                raise different(paths[0], paths[i], f"its {name} ({tensor.dtype}) differs and cannot be averaged")
        if i == 0:
            first = None  # summed: its memory goes
        del weights
    return {name: total[name].div_(len(paths)).to(dtypes[name]) if dtypes[name].is_floating_point else total[name]
            for name in total}


def _accumulator(tensor: torch.Tensor) -> torch.Tensor:
    """What to sum into: zeros, float16 and bfloat16 weights as float32 lest the sum lose their
    precision; for the other weights, which must be equal everywhere, a copy."""
    if tensor.is_floating_point():
        return torch.zeros_like(tensor, dtype=torch.promote_types(tensor.dtype, torch.float32))
    return tensor.clone()


def _write_model(first: str, weights: Mapping[str, torch.Tensor], partial: str) -> None:
    from safetensors.torch import save_file

    os.mkdir(partial)
    save_file(dict(weights), os.path.join(partial, SAFETENSORS), metadata={"format": "pt"})
    for name in sorted(os.listdir(first)):
        source = os.path.join(first, name)
        if os.path.isfile(source) and not name.startswith(".") and _copied(name):
            shutil.copy2(source, os.path.join(partial, name))


def _copied(name: str) -> bool:
    """config.json, generation_config.json, tokenizer files, ...: not weights, not training state."""
    return name not in NOT_COPIED and not name.endswith(NOT_COPIED_SUFFIXES)
