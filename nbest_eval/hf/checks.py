"""Start-up checks of the Trainer's arguments against the keys its evaluations will log.

transformers finds a ``metric_for_best_model`` that no evaluation logs only after the first
evaluation (a ``KeyError`` listing the keys), and follows ``greater_is_better=False`` on a measure
that is better higher without a word. :func:`check_metric_for_best_model` knows the keys before
training: the Trainer's own (``eval_loss``, ``eval_runtime``, ...) and those of every callback that
declares them (``logged_keys(prefix)``: :class:`~nbest_eval.hf.callback.NBestEvalCallback`,
:class:`~nbest_eval.hf.early_stopping.NBestEarlyStoppingCallback`), so a typo fails at once, with a
"did you mean".
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Dict, List

from ..metrics import is_metric_key

logger = logging.getLogger(__name__)

#: the keys the Trainer's evaluate() logs itself, after its prefix (``eval_loss``, ...)
TRAINER_KEYS = ("loss", "runtime", "samples_per_second", "steps_per_second", "model_preparation_time",
                "jit_compilation_time")


def prefixes(trainer: Any) -> List[str]:
    """The metric prefixes of ``trainer``'s evaluations: ``eval``, or ``eval_NAME`` per eval dataset."""
    datasets = getattr(trainer, "eval_dataset", None)
    return [f"eval_{name}" for name in datasets] if isinstance(datasets, dict) else ["eval"]


def logged_keys(trainer: Any) -> Dict[str, bool]:
    """Every key an evaluation of ``trainer`` logs that is known before it runs (not ``compute_metrics``'s),
    and whether it is better higher by definition (every n-best measure, ``nbest_kept_step``)."""
    keys: Dict[str, bool] = {}
    for prefix in prefixes(trainer):
        keys.update({f"{prefix}_{key}": False for key in TRAINER_KEYS})
        for callback in trainer.callback_handler.callbacks:
            if hasattr(callback, "logged_keys"):
                keys.update(callback.logged_keys(prefix))
    return keys


def check_metric_for_best_model(args: Any, trainer: Any) -> None:
    """Refuse a ``metric_for_best_model`` that no evaluation will log (with the nearest keys), or a
    measure better higher with ``greater_is_better=False`` (ValueError). When ``compute_metrics``
    may log the key, a near miss is only a warning."""
    metric = getattr(args, "metric_for_best_model", None)
    if not metric:
        return
    key = metric if metric.startswith("eval_") else f"eval_{metric}"  # as the Trainer reads it
    keys = logged_keys(trainer)
    if key in keys:
        if keys[key] and args.greater_is_better is False:
            raise ValueError(f"metric_for_best_model={metric!r} is better higher (every n-best measure is, and "
                             f"nbest_kept_step grows when the rule keeps a new checkpoint), but greater_is_better="
                             f"False would keep its lowest value: set greater_is_better=True or leave it unset "
                             f"(transformers then sets it True for every metric not ending in 'loss')")
        return
    # compared without the "eval_" every key shares, which would make every short key look near
    near = difflib.get_close_matches(key[len("eval_"):], [k[len("eval_"):] for k in keys], n=3, cutoff=0.75)
    spelled = [f"eval_{k}" if metric.startswith("eval_") else k for k in near]
    hint = f" (did you mean {' or '.join(map(repr, spelled))}?)" if spelled else ""
    if getattr(trainer, "compute_metrics", None) is not None:
        if spelled:
            logger.warning("metric_for_best_model=%r is no key that the Trainer or the n-best callbacks log%s; "
                           "training fails at the first evaluation unless compute_metrics returns it",
                           metric, hint)
        return
    measure = next((key[len(p) + 1:] for p in prefixes(trainer)
                    if key.startswith(p + "_") and is_metric_key(key[len(p) + 1:])), None)
    if measure is not None:
        raise ValueError(f"metric_for_best_model={metric!r} is an n-best measure that no NBestEvalCallback "
                         f"computes{hint}: add {measure!r} to its metrics")
    raise ValueError(f"metric_for_best_model={metric!r} is no key that an evaluation will log{hint}; they are: "
                     f"{', '.join(sorted(keys))}")
