"""Saved ``translation_nbest`` checkpoints: load them (safely), read the settings their run validated
with, and generate their n-best lists exactly as validation did (``nbest-eval select --fairseq-data``)::

    models, cfg, task = load_ensemble("checkpoints/checkpoint_best.pt")
    nbest = generate_nbest(task, models, cfg)                 # the valid split, as validated
    values = task.scorer.score(task.plan.gold, nbest).values

A checkpoint's task config is what its run validated with (beam, length bounds, BPE removal,
prompt matching and count, the split, the scorer's options): :func:`recorded_settings` reads it in
:mod:`nbest_eval.selection.run_settings`' names, and :func:`checkpoint_nbest` generates with it unless told
otherwise, for the prompts the run validated on (:func:`validated_gold`).
"""

import contextlib
import logging
import os
import warnings
from enum import Enum
from typing import Any, Callable, Dict, Iterator, Optional, Union

from fairseq import checkpoint_utils, tasks
from omegaconf import open_dict

from ..data import Gold, InputError, NBest
from ..metrics import PARAMS
from ..scorer import parse_metric_list
from ..selection.run_settings import FAIRSEQ, resolve
from ..training.generation import DECLARED
from . import startup
from . import task as _task  # registers translation_nbest, which the checkpoints name
from .generation import NBestOptions, generate_nbest
from .safe_load import refuse_unsafe, trusted
from .scorer_options import PREFIX
from .task import NBestConfigError

TASK = "translation_nbest"
#: the task config's field of each setting (:mod:`nbest_eval.selection.run_settings`)
FIELDS = {**{s.name: s.fairseq_name for s in DECLARED.values()}, "remove_bpe": "nbest_remove_bpe",
          "detok": "nbest_detok", "prompt_map": "nbest_map", "max_prompts": "nbest_max_prompts",
          "subset": "valid_subset", "metrics": "nbest_metrics", **{name: PREFIX + name for name in PARAMS}}
#: why a checkpoint's record lacks a setting
WHY_MISSING = f" (a checkpoint of another task, or of a plugin version before the option; {TASK} records them)"
logger = logging.getLogger(__name__)
#: a factory of progress bars: total -> an object with ``update(n)`` and ``close()``
Progress = Callable[[int], Any]


def load_ensemble(path: str, overrides: Optional[Dict[str, Any]] = None, trust: bool = False):
    """``(models, cfg, task)`` from a ``translation_nbest`` checkpoint, loaded with torch's safe
    loader (``trust``: full unpickling, see :mod:`~nbest_eval.fairseq.safe_load`). ``overrides``
    replace task options (e.g. ``{"data": ..., "nbest_gold": ...}`` when the files moved). Loading
    writes no n-best files unless ``overrides`` names an ``nbest_save_dir``."""
    if not os.path.isfile(path):
        raise InputError("no such checkpoint file", path)
    overrides = {"nbest_save_dir": None, **(overrides or {})}
    with refuse_unsafe(path), trusted(trust), warnings.catch_warnings():
        # fairseq asks for pinned memory even on a CPU: known and harmless
        warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
        return checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)


def read_checkpoint(path: str, trust: bool = False) -> Dict[str, Any]:
    """A checkpoint's state as fairseq reads it (its config upgraded to the current layout), loaded
    as :func:`load_ensemble` loads it."""
    if not os.path.isfile(path):
        raise InputError("no such checkpoint file", path)
    with refuse_unsafe(path), trusted(trust):
        return checkpoint_utils.load_checkpoint_to_cpu(path)


def recorded_settings(state: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The n-best settings a checkpoint's run validated with (its task config), by setting name;
    None for a checkpoint of another task. A field its plugin version did not have is absent."""
    cfg = state.get("cfg")
    task = cfg.get("task") if cfg is not None else None
    if task is None or task.get("_name") != TASK:
        return None
    settings = {name: _plain(task[field]) for name, field in FIELDS.items() if field in task}
    if "subset" in settings:
        settings["subset"] = (settings["subset"] or "valid").split(",")[0]  # the task scores the first
    if "metrics" in settings:
        settings["metrics"] = parse_metric_list(settings["metrics"])
    return settings


def validated_gold(path: str, gold: Union[str, Gold], *, data: str, settings: Dict[str, Any],
                   trust: bool = False) -> Gold:
    """The gold prompts that checkpoint ``path``'s run validated on with ``settings`` (every one
    :mod:`nbest_eval.selection.run_settings` resolves for fairseq): those the split's sources name, the first
    ``max_prompts`` of them, in source order. Builds the task, no model."""
    state = _with_settings(read_checkpoint(path, trust), settings, data, _gold_path(gold, data))
    try:
        task = tasks.setup_task(state["cfg"]["task"], from_checkpoint=True)
        task.load_dataset(settings["subset"], combine=False, epoch=1)
    except NBestConfigError as err:  # a gold that does not fit these settings' sources
        raise InputError(str(err).removeprefix(f"{TASK}: "), path) from None
    return task.plan.gold


def checkpoint_nbest(path: str, gold: Union[str, Gold], *, beam: Optional[int] = None,
                     nbest_size: Optional[int] = None, max_len_a: Optional[float] = None,
                     max_len_b: Optional[int] = None, lenpen: Optional[float] = None, data: str,
                     subset: Optional[str] = None, remove_bpe: Optional[str] = None, detok: Optional[str] = None,
                     prompt_map: Optional[str] = None, max_prompts: Union[None, int, str] = None,
                     trust: bool = False, progress: Optional[Progress] = None,
                     warn: Callable[[str], Any] = logger.warning) -> NBest:
    """The n-best lists of checkpoint ``path`` for the prompts its run validated on, on ``subset``
    of the binarized ``data``, against ``gold`` (a path, or a :class:`Gold` read from one),
    generated and post-processed as validation does. Each setting left None is what the run
    recorded (InputError naming it where it recorded none); ``"none"``: no BPE removal, every
    prompt. ``progress(total)``: a bar that counts the prompts generated. The task's load-time
    messages are not logged (:func:`validated_gold` says the prompts); ``warn`` gets a length bound
    beyond the model's positions, in select's option names."""
    given = {k: v for k, v in locals().items() if k in FIELDS}
    state = read_checkpoint(path, trust)
    settings = resolve(FAIRSEQ, [(path, recorded_settings(state))], given, WHY_MISSING).values
    state = _with_settings(state, settings, data, _gold_path(gold, data))
    options = NBestOptions(**{name: settings[name] for name in (*DECLARED, "remove_bpe", "detok")})
    with refuse_unsafe(path), trusted(trust), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
        with _task_unheard():
            models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], state=state)
            models = [in_run_dtype(model, cfg) for model in models]
            task.load_dataset(settings["subset"], combine=False, epoch=1)
        problem = startup.length_problem(task.plan, task.nbest_generator, option="--max-len")
        if problem:
            warn(problem)
        bar = None if progress is None else _count_prompts(task, progress(len(task.plan)))
        try:
            return generate_nbest(task, models, cfg, settings["subset"], options)
        finally:
            if bar is not None:
                bar.close()


def in_run_dtype(model: Any, cfg: Any) -> Any:
    """``model`` cast to the dtype its run computed in (``cfg``: the run's config): fairseq loads a
    checkpoint's weights into a float32 model, and an --fp16 run's lists come from half weights (the
    saved half weights widen and narrow back exactly)."""
    common = cfg.common
    if common.get("fp16") or common.get("memory_efficient_fp16"):
        return model.half()
    if common.get("bf16") or common.get("memory_efficient_bf16"):
        import torch

        return model.to(torch.bfloat16)
    return model


def _with_settings(state: Dict[str, Any], settings: Dict[str, Any], data: str, gold: str) -> Dict[str, Any]:
    """``state`` with its task config set to validate with ``settings`` on ``data`` against ``gold``,
    writing no n-best files; a checkpoint of another task becomes a ``translation_nbest`` one (it
    recorded no settings, so every one was given)."""
    task = state["cfg"]["task"]
    with open_dict(task):
        task["_name"] = TASK
        for name, value in settings.items():
            task[FIELDS[name]] = ",".join(value) if name == "metrics" else value
        task["data"], task["nbest_gold"], task["nbest_save_dir"] = data, gold, None
    return state


@contextlib.contextmanager
def _task_unheard() -> Iterator[None]:
    """Without the task's messages below ERROR: loaded once for the prompts and once a checkpoint, it
    would repeat its prompt summary and length warning a checkpoint, in the training options' names."""
    loggers = [logging.getLogger(module.__name__) for module in (_task, startup)]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def _gold_path(gold: Union[str, Gold], data: str) -> str:
    path = gold.path if isinstance(gold, Gold) else gold
    if not path:
        raise InputError("fairseq checkpoints are scored against a gold file: give its path")
    if not os.path.isdir(data):
        raise InputError("no such data directory (fairseq-preprocess output)", data)
    return path


def _count_prompts(task, bar):
    """Count each generated batch's prompts on ``bar``: the task generates a batch per
    ``inference_step`` (this task object only)."""
    step = task.inference_step

    def counted(generator, models, sample, **kwargs):
        out = step(generator, models, sample, **kwargs)
        bar.update(len(sample["id"]))
        return out

    task.inference_step = counted
    return bar


def _plain(value: Any) -> Any:
    """A config value as plain JSON: fairseq's choices as strings."""
    return str(value) if isinstance(value, Enum) else value
