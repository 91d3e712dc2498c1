"""Saved Hugging Face checkpoints (``save_pretrained`` / Trainer ``checkpoint-*`` directories):
load them, score them as the callback does, or generate their n-best lists (``nbest-eval select --hf``).

:func:`checkpoint_nbest` has the signature of :func:`nbest_eval.fairseq.checkpoints.checkpoint_nbest`
(the generation options first, then what only Hugging Face needs: ``batch_size``, ``batch_tokens``, ``tokenizer``,
``prompts``, ``device``). Weights load through transformers (safetensors where the checkpoint has them).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from ..data import Gold, InputError, NBest
from ..files.output import PathLike
from ..formats import read_gold
from ..selection.run_settings import GENERATION, Setting
from ..training.generation import DECLARED
from .evaluator import NBestEvaluator
from .positions import LengthNames
from .result import NBestResult
from .settings import SETTINGS_FILE, evaluator_from_settings, read_settings, settings_path

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
        with _quiet_loading():
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


@contextlib.contextmanager
def _quiet_loading():
    """Without transformers' "Loading weights" bar: select loads one model a checkpoint, and a bar for
    each buries select's own lines; a load takes well under a second."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def score_checkpoint(path: PathLike, gold: Union[PathLike, Gold], prompts: Any = None, *, device: Device = None,
                     tokenizer: Optional[PathLike] = None, gather_nbest: bool = False, **options: Any) -> NBestResult:
    """Load a checkpoint directory and score it with the evaluator ``options`` given (NBestEvaluator's,
    its defaults for the others): the callback's scoring, not its settings. It does not read what the run
    recorded (beam, length bound, batches, precision, prompts), so unless ``options`` repeat them its
    lists and values differ from the run's; :func:`checkpoint_nbest` generates as the run recorded.

    ``device`` defaults to the first GPU when there is one, else the CPU.
    """
    model, tok = load_model(path, device or default_device(), tokenizer)
    evaluator = NBestEvaluator(gold, tok, prompts, **options)
    return evaluator.evaluate(model, gather_nbest=gather_nbest)


def checkpoint_nbest(path: PathLike, gold: Union[PathLike, Gold], *, beam: Optional[int] = None,
                     nbest_size: Optional[int] = None, max_len_a: Optional[float] = None,
                     max_len_b: Optional[int] = None, lenpen: Optional[float] = None, batch_size: Optional[int] = None,
                     batch_tokens: Optional[int] = None, tokenizer: Optional[PathLike] = None, prompts: Any = None,
                     device: Device = None,
                     progress: Optional[Callable[[int], Any]] = None, **options: Any) -> NBest:
    """The n-best lists of a checkpoint directory for the prompts its run validated on (``nbest-eval
    select --hf``), generated as the callback generated them.

    fairseq-style options, each None for what the callback recorded in the checkpoint
    (:mod:`nbest_eval.hf.settings`), else NBestEvaluator's (the callback's) default: ``beam``,
    ``nbest_size`` (default: beam), at most ``max_len_a * source length + max_len_b`` new tokens,
    length penalty ``lenpen``, ``batch_size``, ``batch_tokens``; ``options``: other NBestEvaluator
    arguments (the recorded ``precision`` among them). A length
    beyond the model's positions is refused before generating. ``progress(total)``: a bar that
    counts the prompts generated.
    """
    overrides = {EVALUATOR[name]: value for name, value in
                 dict(beam=beam, nbest_size=nbest_size, max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen,
                      batch_size=batch_size, batch_tokens=batch_tokens).items() if value is not None}
    if "max_len_b" in overrides or "max_len_a" in overrides:
        overrides.setdefault("max_len_a", 0.0)
        overrides.setdefault("max_len_b", 0)
    overrides.update(options)
    model, tok = load_model(path, device or default_device(), tokenizer)
    record = read_settings(path)
    gold = gold if isinstance(gold, Gold) else read_gold(os.fspath(gold))
    if record is None:
        evaluator = NBestEvaluator(gold, tok, prompts, metrics=["map"], **overrides)
    else:
        evaluator = evaluator_from_settings(record, gold, tok, source=settings_path(path), **overrides)
    try:
        evaluator.check_lengths(model, SELECT_NAMES)
    except InputError as err:
        raise InputError(str(err), os.fspath(path)) from None
    bar = None if progress is None else progress(len(evaluator.prompts))
    hyps: Dict[int, Any] = {}
    for batch in evaluator.batches(model):
        hyps.update(zip(batch, evaluator.generate(model, batch)))
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    return {prompt.id: hyps[i] for i, prompt in enumerate(evaluator.prompts)}


def recorded_settings(path: PathLike) -> Optional[Dict[str, Any]]:
    """The settings the callback recorded in checkpoint ``path``, in :mod:`nbest_eval.selection.run_settings`'
    names (None: it has no record)."""
    record = read_settings(path)
    if record is None:
        return None
    evaluator = record["evaluator"]
    out = {name: evaluator[key] for name, key in EVALUATOR.items() if key in evaluator}
    if evaluator.get("max_len_a") is None and evaluator.get("max_len_b") is None and "max_new_tokens" in evaluator:
        out.update(max_len_a=0.0, max_len_b=evaluator["max_new_tokens"])  # the same bound
    if "metrics" in evaluator:
        out["metrics"] = evaluator["metrics"]
    out.update(evaluator.get("scorer_options") or {})
    out["prompts"] = record["prompts"]
    return out


def validated_gold(gold: Gold, prompts: Optional[List[str]]) -> Gold:
    """The gold prompts a run validated on (``prompts``: their ids; None: every one)."""
    if prompts is None:
        return gold
    absent = next((pid for pid in prompts if pid not in gold), None)
    if absent is not None:
        raise InputError(f"the run validated on prompt {absent!r}, which this gold does not have: give the gold it "
                         f"was trained with", gold.path)
    return Gold([gold[pid] for pid in prompts], gold.path)


def _defaults() -> str:
    """NBestEvalCallback's (NBestEvaluator's) defaults, as select's options."""
    declared = inspect.signature(NBestEvaluator).parameters
    return (f"--beam {declared['num_beams'].default} --max-len-a 0 --max-len-b {declared['max_new_tokens'].default} "
            f"--lenpen {declared['length_penalty'].default}")


#: NBestEvaluator's batch settings and its precision, select's settings of the same names: a record
#: without one (an older version's) had the evaluator's default, which with the other recorded gives that
#: version's batches (and no autocast)
EVALUATOR_OWN = ("batch_size", "batch_tokens", "precision")
#: select's settings (:mod:`nbest_eval.selection.run_settings`) and NBestEvaluator's argument of each
EVALUATOR = {**{s.name: s.hf_name for s in DECLARED.values()}, **{name: name for name in EVALUATOR_OWN}}
#: what the generation settings of an HF checkpoint are (select has no option for the precision: checkpoints
#: that recorded different ones are selected in separate runs)
SETTINGS = GENERATION + tuple(
    Setting(name, required=False, default=inspect.signature(NBestEvaluator).parameters[name].default,
            settable=name != "precision")
    for name in EVALUATOR_OWN) + (Setting("prompts", required=False, settable=False),)
WHY_MISSING = (f" (no {SETTINGS_FILE}: NBestEvalCallback writes it beside each checkpoint it saves; for its "
               f"defaults: {_defaults()})")
#: select's spelling of the settings a length refusal advises (a recorded max_new_tokens is --max-len-b)
SELECT_NAMES = LengthNames(max_len_a="--max-len-a", max_len_b="--max-len-b", max_new_tokens="--max-len-b",
                           max_source_length="the run's max_source_length")
