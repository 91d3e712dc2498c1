"""Saved Hugging Face checkpoints (``save_pretrained`` / Trainer ``checkpoint-*`` directories):
load them, score them as the callback does, or generate their n-best lists (``nbest-eval select --hf``).

:func:`checkpoint_nbest` has the signature of :func:`nbest_eval.fairseq.checkpoints.checkpoint_nbest`
(the generation options first, then what only Hugging Face needs: ``batch_size``, ``tokenizer``,
``prompts``, ``device``). Weights load through transformers (safetensors where the checkpoint has them).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple, Union

import torch

from ..data import Gold, InputError, NBest
from ..output import PathLike
from .evaluator import NBestEvaluator
from .result import NBestResult

Device = Union[None, str, "torch.device"]
#: a tokenizer directory holds at least one of these (its configuration or its vocabulary); without
#: them, AutoTokenizer builds a tokenizer with an empty vocabulary from the model's config alone
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "source.spm", "vocab.json", "vocab.txt")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(path: PathLike, device: Device = None, tokenizer: Optional[PathLike] = None) -> Tuple[Any, Any]:
    """(model, tokenizer) from a checkpoint directory (no network), the model in eval mode.

    ``tokenizer``: another directory to load the tokenizer from (default: the checkpoint's own).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    path = os.fspath(path)
    if not os.path.isdir(path):
        raise InputError("not a checkpoint directory", path)
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
        model = auto.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"cannot load a model from it ({str(err).splitlines()[0]})", path) from None
    tokenizer_dir = path if tokenizer is None else os.fspath(tokenizer)
    if not any(os.path.isfile(os.path.join(tokenizer_dir, name)) for name in TOKENIZER_FILES):
        raise InputError(f"no tokenizer files (none of {', '.join(TOKENIZER_FILES)}): transformers would make a "
                         f"blank tokenizer from the config, which scores everything 0; pass the tokenizer "
                         f"directory (--tokenizer)", tokenizer_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load a tokenizer from it ({str(err).splitlines()[0]}); "
                         f"pass the tokenizer directory", tokenizer_dir) from None
    if device is not None:
        model.to(device)
    model.eval()
    return model, tokenizer


def score_checkpoint(path: PathLike, gold: Union[PathLike, Gold], prompts: Any = None, *, device: Device = None,
                     tokenizer: Optional[PathLike] = None, gather_nbest: bool = False, **options: Any) -> NBestResult:
    """Load a checkpoint directory and score it as the callback does (``options``: NBestEvaluator's).

    ``device`` defaults to the first GPU when there is one, else the CPU.
    """
    model, tok = load_model(path, device or default_device(), tokenizer)
    evaluator = NBestEvaluator(gold, tok, prompts, **options)
    return evaluator.evaluate(model, gather_nbest=gather_nbest)


def checkpoint_nbest(path: PathLike, gold: Union[PathLike, Gold], *, beam: int = 10, nbest_size: Optional[int] = None,
                     max_len_a: float = 0.0, max_len_b: int = 200, lenpen: float = 1.0, batch_size: int = 32,
                     tokenizer: Optional[PathLike] = None, prompts: Any = None, device: Device = None,
                     **options: Any) -> NBest:
    """The n-best lists of a checkpoint directory for every gold prompt (``nbest-eval select --hf``).

    fairseq-style options: ``beam``, ``nbest_size`` (default: beam), at most
    ``max_len_a * source length + max_len_b`` new tokens, length penalty ``lenpen``. Batched as the
    callback's evaluations (:meth:`NBestEvaluator.batches`, default ``batch_size`` 32, the callback's),
    so that with the callback's settings the lists are the ones it scored during training.
    """
    model, tok = load_model(path, device or default_device(), tokenizer)
    evaluator = NBestEvaluator(gold, tok, prompts, num_beams=beam, num_return_sequences=nbest_size or beam,
                               max_new_tokens=None, max_len_a=max_len_a, max_len_b=max_len_b,
                               length_penalty=lenpen, batch_size=batch_size, metrics=["map"], **options)
    hyps = evaluator.generate(model)
    return {prompt.id: nbest for prompt, nbest in zip(evaluator.prompts, hyps)}
