"""The early-stopping rule inside fairseq's loop, and early-stopping state that survives a restart.

fairseq decides by itself right after each validation: ``fairseq_cli.train.should_stop_early``
(``--patience P``: a strictly better value, else one more run) and
``checkpoint_utils.save_checkpoint`` (``checkpoint_best.pt`` is rewritten whenever the value is at
least the best so far). When ``--best-checkpoint-metric`` is an n-best measure and ``--patience``
is set, the ``translation_nbest`` task decides instead with :mod:`nbest_eval.training.early_stopping` in
``post_validate``, which fairseq runs just before both, and sets their state (:func:`carry_out`)
so that fairseq's own code carries the decision out: it stops when the rule stops, and writes
``checkpoint_best.pt`` exactly when the rule keeps this validation. Nothing of fairseq is replaced.
When training ends, whatever ended it, the log says what ``checkpoint_best.pt`` holds and why
(:func:`at_end_of_training`).

fairseq keeps that state in memory only, and saves, but never reloads, a checkpoint's task state.
The task puts the rule's state (or, when fairseq decides alone, fairseq's ``best``/``num_runs``)
into every checkpoint (:func:`state_to_save`) and, when fairseq resumes training (it restores
``save_checkpoint.best`` exactly then), reads it back from the checkpoint resumed from
(:func:`restore`), checked first: a damaged or inconsistent state, or one of another measure or
prompts, is dropped with one warning, and training goes on with patience counted from 0.
"""

import logging
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from fairseq import checkpoint_utils, utils
from fairseq.distributed import utils as distributed_utils

from ..data import InputError
from ..scorer import Scorer
from ..significance import PerPrompt
from ..stats import Stats
from ..training.early_stopping import DEFAULT_RULE, Decision, EarlyStopping, State
from ..training.stopping_state import finite_number, shown
from .safe_load import load_state
from .scorer_options import scorer_options

logger = logging.getLogger(__name__)

#: key of this task's entry in a checkpoint's ``task_state``
STATE_KEY = "nbest_eval"


def rule_from_config(cfg: Any, logged_keys: Optional[List[str]]) -> Optional[EarlyStopping]:
    """The rule the task decides with: with ``--patience`` and an n-best ``--best-checkpoint-metric``
    (``logged_keys``: the ``--nbest-metrics``, None without a gold); None where fairseq decides alone
    (the loss, no ``--patience``). An ``--nbest-stopping`` that cannot work raises InputError."""
    metric, rule = cfg.best_checkpoint_metric, cfg.nbest_stopping
    decides = logged_keys is not None and metric in logged_keys
    if rule is None and not decides:
        return None
    if not decides:
        raise InputError(f"--nbest-stopping {rule} tests an n-best measure's per-prompt statistics, and "
                         f"--best-checkpoint-metric {metric} is none (the loss has no per-prompt statistics); "
                         f"name an n-best measure, or leave --nbest-stopping out for fairseq's own rule")
    if cfg.patience is None or cfg.patience < 1:
        if rule is None:
            return None  # no early stopping asked for; checkpoint_best.pt is fairseq's
        raise InputError(f"--nbest-stopping {rule} needs --patience P >= 1 (now {cfg.patience})")
    try:
        return EarlyStopping(metric, rule or DEFAULT_RULE, cfg.patience, bool(cfg.maximize_best_checkpoint_metric),
                             cfg.nbest_stopping_alpha, cfg.nbest_stopping_warmup)
    except InputError as err:
        raise InputError(f"--nbest-stopping: {err}") from None


#: the logging-output key of a valid step's per-prompt statistics (hidden from the log: fairseq skips "_" keys)
ROWS = "_nbest_rows"


def rows_tensor(plan: Any, scorer: Scorer, per_prompt: List[Tuple[str, Stats]]) -> torch.Tensor:
    """A valid step's per-prompt statistics as a (plan's prompts x statistics) tensor, zeros for the
    prompts it did not score. It travels in the logging output, so fairseq sums it over the workers
    (and zeroes it for a padding batch) as it sums every other statistic."""
    return torch.from_numpy(PerPrompt.placed(scorer, plan.gold.ids(), per_prompt).matrix)


def add_rows(rows: Optional[torch.Tensor], logging_outputs: List[Dict[str, Any]]) -> torch.Tensor:
    """``rows`` (None: none yet) plus a valid step's rows from its logging outputs, as fairseq hands
    them to ``reduce_metrics``: summed over the workers (the same on each), zeros for a padding batch."""
    step = sum(torch.as_tensor(log[ROWS], dtype=torch.float64).cpu() for log in logging_outputs if ROWS in log)
    return step if rows is None else rows + step


def decide(stopping: EarlyStopping, state: State, per_prompt: PerPrompt, stats: Dict[str, Any],
           gold: Optional[str] = None) -> State:
    """The rule on this validation, carried out by fairseq's own stop and checkpoint_best.pt
    decisions next (:func:`carry_out`); ``stats`` (the valid line) gets ``best_{metric}``, the kept
    validation's value, and ``nbest_kept_update``, its update; ``gold``: the validated gold's digest,
    recorded in the state. Returns the next state."""
    state, decision = stopping.decide(state, stats=per_prompt, step=int(stats.get("num_updates", 0)), gold=gold)
    kept_value = 0.0 if state.kept_value is None else state.kept_value
    carry_out(decision, float(stats[stopping.key]), kept_value, stopping.maximize, stopping.patience)
    stats["best_" + stopping.key] = kept_value
    stats["nbest_kept_update"] = state.kept_step
    logger.info(f"translation_nbest: early stopping: {stopping.explain(decision)}; keeping the checkpoint of "
                f"update {state.kept_step}")
    return state


def carry_out(decision: Decision, value: float, kept_value: float, maximize: bool, patience: int) -> None:
    """Set fairseq's ``should_stop_early`` and ``save_checkpoint`` state so that, called next with
    ``value`` (the logged value of this validation) and ``--patience`` ``patience``, they stop iff
    ``decision.stop`` and write checkpoint_best.pt iff the rule keeps this validation (``kept_value``:
    the kept one's value). fairseq stops at ``patience`` runs; the rule may wait longer (one whose patience grows),
    so fairseq's count is the rule's, held below ``patience`` until the rule stops."""
    for fn in _stop_early_functions():
        if decision.runs == 0:
            fn.best = None  # fairseq: "improved", num_runs = 0
        else:  # fairseq: not improved, num_runs + 1, stop at patience
            runs = patience if decision.stop else min(decision.runs, patience - 1)
            fn.best, fn.num_runs = _beyond(value, maximize), runs - 1
    save = checkpoint_utils.save_checkpoint
    if decision.kept == decision.index:  # a "best" just short of this value: checkpoint_best.pt, then best = value
        save.best = math.nextafter(value, -math.inf if maximize else math.inf)
    else:  # a "best" just past both values: no checkpoint_best.pt, and best stays about the best seen
        save.best = _beyond(max(value, kept_value) if maximize else min(value, kept_value), maximize)


#: fairseq_cli.train's logger, and the start of the line it logs once the training loop is over, however it ended
TRAIN_LOGGER, DONE_TRAINING = "fairseq_cli.train", "done training"


class _AtEndOfTraining(logging.Filter):
    """Runs ``conclude`` when fairseq logs "done training in N seconds" (just before that line): the
    task has no end-of-training hook, and that line follows the training loop whether the rule,
    ``--max-epoch``, ``--max-update`` or the time limit ended it (not a crash). Only a worker that logs
    at INFO gets there (fairseq's rank 0)."""

    def __init__(self, conclude: Callable[[], None]):
        super().__init__()
        self.conclude = conclude

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(DONE_TRAINING):
            self.conclude()
        return True


def at_end_of_training(conclude: Callable[[], None]) -> None:
    """Have ``conclude`` (the task's end-of-training line) run when training is over, in place of any
    earlier task's in this process."""
    train_logger = logging.getLogger(TRAIN_LOGGER)
    for old in [f for f in train_logger.filters if isinstance(f, _AtEndOfTraining)]:
        train_logger.removeFilter(old)
    train_logger.addFilter(_AtEndOfTraining(conclude))


def _beyond(value: float, maximize: bool) -> float:
    """The next float past ``value`` in the better direction: what ``value`` cannot match."""
    return math.nextafter(value, math.inf if maximize else -math.inf)


def state_to_save(metric: Optional[str], stopping: Optional[EarlyStopping], state: Optional[State]
                  ) -> Optional[Dict[str, Any]]:
    """The entry to put under :data:`STATE_KEY` in the task state: the rule's state when the rule
    decides, else fairseq's patience count; None before the first validation."""
    if stopping is not None:
        return None if state is None or not state.seen else \
            {"stopping": {"metric": metric, "rule": stopping.describe(), "state": state.to_dict()}}
    for fn in _stop_early_functions():
        best = getattr(fn, "best", None)
        if best is not None:
            return {"patience": {"best": float(utils.item(best)), "num_runs": int(getattr(fn, "num_runs", 0)),
                                 "metric": metric}}
    return None


def restore(cfg: Any, stopping: Optional[EarlyStopping], ids: List[str], gold: Optional[str] = None
            ) -> Optional[State]:
    """When fairseq has just resumed training, restore the early-stopping state saved in the
    checkpoint it resumed from (``cfg``: the task config, with the run's checkpoint options): the
    rule's, which is returned (``stopping``: the rule, None when fairseq decides alone; ``ids``: the
    validation's prompts, ``gold`` their gold's digest), or fairseq's patience count. A state that is
    not there, or fails :func:`_read_saved`'s checks, is dropped with one warning naming why: patience
    counts from 0.
    Rank 0 reads and checks the file, every rank gets the result."""
    if not hasattr(checkpoint_utils.save_checkpoint, "best"):
        return None  # a fresh run (or meters reset): nothing to restore
    path = resumed_checkpoint(cfg)
    saved, problem = None, None
    if _data_parallel_rank() == 0:
        try:
            saved = _read_saved(path, cfg, stopping, ids, gold)
        except InputError as err:
            problem = str(err)
    if distributed_utils.get_data_parallel_world_size() > 1:
        saved, problem = distributed_utils.broadcast_object(
            (saved, problem), src_rank=0, group=distributed_utils.get_data_parallel_group())
    if problem is not None:
        logger.warning(f"translation_nbest: early-stopping state not restored from {path}: {problem}; "
                       f"patience counts from 0")
        return None
    if stopping is not None:
        logger.info(f"translation_nbest: restored the early-stopping state from {path}: {saved.seen} "
                    f"validation(s), keeping validation {saved.kept + 1}, {saved.runs} without improvement since")
        return saved
    best, num_runs = saved
    for fn in _stop_early_functions():
        fn.best, fn.num_runs = best, num_runs
    logger.info(f"translation_nbest: restored early-stopping state from {path}: best {cfg.best_checkpoint_metric} "
                f"{best}, {num_runs} validation(s) without improvement since")
    return None


def _read_saved(path: str, cfg: Any, stopping: Optional[EarlyStopping], ids: List[str], gold: Optional[str]
                ) -> Union[State, Tuple[float, int]]:
    """The early-stopping state in the checkpoint at ``path``, checked: the rule's
    (:meth:`~nbest_eval.training.early_stopping.EarlyStopping.restore`, against the run's rule, measure,
    prompts, gold and the checkpoint's update), or fairseq's ``best`` and ``num_runs``. InputError
    says what is wrong."""
    try:
        checkpoint = load_state(path)
    except Exception as err:  # a missing or unreadable file is not worth stopping the run for
        raise InputError(f"cannot read it: {err}") from None
    kind = "patience" if stopping is None else "stopping"
    saved = _entry(checkpoint, kind)
    if saved.get("metric") not in (None, cfg.best_checkpoint_metric):
        raise InputError(f"its state is for --best-checkpoint-metric {saved.get('metric')!r:.60}, "
                         f"not {cfg.best_checkpoint_metric}")
    updates = _num_updates(checkpoint)
    if stopping is None:
        return _patience(saved, updates)
    rule = saved.get("rule")  # the rule's describe(): its name first
    if isinstance(rule, str) and rule.split(" ", 1)[0] != stopping.rule:
        raise InputError(f"its state is for the {rule.split(' ', 1)[0]!r:.60} rule, not {stopping.rule!r} "
                         f"(--nbest-stopping)")
    scorer = Scorer([stopping.key], **scorer_options(cfg))
    # no step bound: fairseq's update count restarts when a resume does not restore the optimizer state
    # (--no-save-optimizer-state, --reset-optimizer), so a kept update may lie beyond the current one
    return stopping.restore(saved.get("state"), scorer, ids, None, gold)


def _entry(checkpoint: Any, kind: str) -> Dict[str, Any]:
    """The task's ``kind`` entry in a checkpoint: ``checkpoint["task_state"][STATE_KEY][kind]``, a dict."""
    data, where = checkpoint, "the checkpoint"
    for key in ("task_state", STATE_KEY, kind):
        if not isinstance(data, dict):
            raise InputError(f"{where} is a {type(data).__name__}, not a dict")
        if data.get(key) is None:
            raise InputError(f"it has no {kind} state (saved by another task, or with other early-stopping options?)")
        data, where = data[key], f"its {key} entry"
    if not isinstance(data, dict):
        raise InputError(f"{where} is a {type(data).__name__}, not a dict")
    return data


def _num_updates(checkpoint: Dict[str, Any]) -> int:
    """The update a checkpoint was saved at, where fairseq resumes (``optimizer_history``'s last)."""
    history = checkpoint.get("optimizer_history")
    last = history[-1] if isinstance(history, list) and history else None
    updates = last.get("num_updates") if isinstance(last, dict) else None
    if not isinstance(updates, int) or isinstance(updates, bool) or updates < 0:
        raise InputError("it records no update count (optimizer_history's num_updates)")
    return updates


def _patience(saved: Dict[str, Any], updates: int) -> Tuple[float, int]:
    """fairseq's ``should_stop_early`` state, ``best`` and ``num_runs``, from the task's entry, checked:
    a number, and a count of validations without improvement (at most one an update)."""
    missing = [key for key in ("best", "num_runs") if key not in saved]
    if missing:
        raise InputError(f"its patience state has no {' or '.join(missing)}")
    best, runs = saved["best"], saved["num_runs"]
    if not finite_number(best):
        raise InputError(f"its best {shown(best)} is not a finite number")
    if not isinstance(runs, int) or isinstance(runs, bool) or not 0 <= runs <= updates:
        raise InputError(f"its num_runs {shown(runs)} is not a count from 0 to the {updates} update(s) so far")
    return float(best), runs


def resumed_checkpoint(cfg: Any) -> str:
    """The file fairseq's ``checkpoint_utils.load_checkpoint`` resumes from (same rules)."""
    suffix = cfg.checkpoint_suffix or ""
    if cfg.restore_file == "checkpoint_last.pt":
        path = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        if not os.path.exists(path) and cfg.continue_once:
            path = cfg.continue_once
        return path
    return cfg.restore_file.replace(".pt", suffix + ".pt")


def _data_parallel_rank() -> int:
    return distributed_utils.get_data_parallel_rank() if torch.distributed.is_initialized() else 0


def _stop_early_functions() -> List[Any]:
    """fairseq_cli.train.should_stop_early, which keeps ``best`` and ``num_runs`` as attributes
    (also under ``__main__`` when training runs as ``python -m fairseq_cli.train``)."""
    found = []
    for name in ("fairseq_cli.train", "__main__"):
        fn = getattr(sys.modules.get(name), "should_stop_early", None)
        if callable(fn) and fn not in found:
            found.append(fn)
    if not found:
        from fairseq_cli import train
        found.append(train.should_stop_early)
    return found
