"""Early stopping on an n-best measure in the Trainer, by :mod:`nbest_eval.training.early_stopping`'s rules.

    nbest = NBestEvalCallback("valid.gold.txt", tokenizer, num_beams=8)
    stopping = NBestEarlyStoppingCallback("map", patience=3)            # rule "proportional"
    args = Seq2SeqTrainingArguments(..., eval_strategy="epoch", save_strategy="epoch",
                                    metric_for_best_model="nbest_kept_step", load_best_model_at_end=True)
    trainer = Seq2SeqTrainer(model, args, ..., callbacks=[nbest, stopping])

It replaces transformers' ``EarlyStoppingCallback``, which stops on the first ``patience``
evaluations without a strictly better value, warm-up and noise included. At each evaluation the
:class:`NBestEvalCallback` hands it its per-prompt statistics (all-reduced: every rank decides
alike) inside the evaluation loop, before the Trainer logs the metrics; it asks the rule, prints
the verdict after the metrics line (:mod:`.console`: seen at default logging), sets
``control.should_training_stop``, and at the end of training prints what the rule kept and why. It adds
``eval_nbest_kept_step`` (``eval_{name}_nbest_kept_step``), the global step whose checkpoint the
rule keeps: it only grows, and grows exactly when the rule keeps a new checkpoint, so with
``metric_for_best_model="nbest_kept_step"`` the Trainer's own best checkpoint
(``load_best_model_at_end``, ``save_strategy="best"``, ``save_total_limit``) is the rule's. The
rule's state is exported with the Trainer's state (``trainer_state.json``) and read back when
training resumes from a checkpoint, checked first as the fairseq task checks its own: a damaged or
inconsistent state, or one of another measure or prompts, is dropped with one warning and the rule
counts from a fresh state.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Tuple, Union

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from ..data import InputError
from ..metrics import UnknownMetric, is_metric_key
from ..metrics.registry import unknown_metric
from ..significance import DEFAULT_ALPHA
from ..training.early_stopping import DEFAULT_RULE, Decision, EarlyStopping, State
from .callback import NBestEvalCallback, _find_trainer
from .console import say

logger = logging.getLogger(__name__)

KEPT_STEP = "nbest_kept_step"


class NBestEarlyStoppingCallback(TrainerCallback, ExportableState):
    """Stops training by an early-stopping rule on ``metric``, an n-best measure that the
    :class:`NBestEvalCallback` of the same ``name`` computes (see the module docstring).

    Args:
        metric: the measure (a key of the n-best callback's metrics, e.g. ``map``; ``eval_map`` and
            ``eval_{name}_map``, the logged keys, name it too, as in ``metric_for_best_model``).
        patience, rule, alpha, warmup: as :class:`~nbest_eval.training.early_stopping.EarlyStopping`
            (``rule``: a name of its ``RULES``, whose ``rules_help()`` says what each does).
        name: the n-best callback's ``name`` (None: the one without a name).
    """

    def __init__(self, metric: str = "map", patience: int = 3, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA,
                 warmup: Union[int, str, None] = None, name: Optional[str] = None,
                 stopping_state: Optional[Dict[str, Any]] = None):
        measure = _measure(metric, name)
        if not is_metric_key(measure):  # now, with a "did you mean", as metric_for_best_model's typos
            raise UnknownMetric(f"NBestEarlyStoppingCallback: {unknown_metric(measure)}")
        self.stopping = EarlyStopping(measure, rule, patience, True, alpha, warmup)
        self.name = name
        #: a state to resume from (transformers rebuilds the callback from :meth:`state`'s args): it is
        #: input, read and checked when training resumes (:meth:`_resumed`), never here
        self._given_state = stopping_state
        self.stopping_state = State()
        self._training, self._decided_step, self._async = False, None, False
        self._decision: Optional[Decision] = None  # taken at _decided_step; said (and acted on) in on_evaluate

    @property
    def kept_step_key(self) -> str:
        return f"{self.name}_{KEPT_STEP}" if self.name else KEPT_STEP

    def logged_keys(self, prefix: str) -> Dict[str, bool]:
        """The key it logs: ``eval_nbest_kept_step`` whatever the prefix (it decides once a step), better higher."""
        return {f"eval_{self.kept_step_key}": True}

    def state(self) -> Dict[str, Any]:
        """For ``trainer_state.json``: transformers rebuilds the callback from ``args`` on resume."""
        stopping = self.stopping
        return {"args": {"metric": stopping.key, "patience": stopping.patience, "rule": stopping.rule,
                         "alpha": stopping.alpha, "warmup": stopping.warmup, "name": self.name,
                         "stopping_state": self.stopping_state.to_dict()},
                "attributes": {}}

    def on_train_begin(self, args, state, control, **kwargs):
        """Check the set-up before training; on resume, take the state saved in the checkpoint."""
        keys = self._nbest_callback().evaluator.scorer.keys
        if self.stopping.key not in keys:
            raise ValueError(f"NBestEarlyStoppingCallback stops on {self.stopping.key!r}, which the NBestEvalCallback "
                             f"does not compute (it computes {', '.join(keys)})")
        #: mode="async": the sidecar decides with this rule (the manifest's); this callback only names it
        self._async = self._nbest_callback().mode == "async"
        key = args.metric_for_best_model or ""
        if args.load_best_model_at_end and not self._async and key.removeprefix("eval_") != self.kept_step_key:
            logger.warning("load_best_model_at_end loads the Trainer's best by metric_for_best_model=%r, not the "
                           "checkpoint that %s keeps: set metric_for_best_model=%r for that", key,
                           self.stopping.describe(), self.kept_step_key)
        # a fresh run counts from nothing (a callback reused by hyperparameter_search too); a resumed one
        # from the state saved with the checkpoint
        self.stopping_state = self._resumed(state) if state.global_step > 0 else State()
        resumed = self.stopping_state
        if resumed.seen:
            say(state, f"n-best early stopping: resumed after {resumed.seen} evaluation(s), keeping step "
                       f"{resumed.kept_step}, {resumed.runs} without improvement since")
        self._training, self._decided_step, self._decision = True, None, None

    def on_train_end(self, args, state, control, **kwargs):
        """One line on what the rule kept and why (whether it ever left warm-up)."""
        if self._training and self.stopping_state.seen:
            say(state, f"n-best early stopping: {self.stopping.conclusion(self.stopping_state, unit='step')}")
        self._training = False

    def after_nbest_evaluation(self, nbest: NBestEvalCallback, state: Any) -> Dict[str, float]:
        """Called by the n-best callback inside the evaluation loop, before the Trainer logs the
        metrics: decide now, so that ``eval_nbest_kept_step`` is in the logged metrics."""
        if nbest.name != self.name or not self._training or self._async or state.global_step == self._decided_step:
            return {}
        return self._decide(nbest, state.global_step)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        """Say this step's decision and act on it. Decide once per training step that evaluates: an
        evaluate() outside training, or a second evaluation dataset at the same step, is no new
        validation for the rule. Not decided in the loop (the n-best callback was not hooked into
        it): decide now, and add ``eval_nbest_kept_step`` to the metrics and the log history."""
        if not self._training or self._async:
            return
        if state.global_step != self._decided_step:
            extra = self._decide(self._nbest_callback(), state.global_step)
            if metrics is not None:
                metrics.update(extra)
            if state.log_history and state.log_history[-1].get("step") == state.global_step:
                state.log_history[-1].update(extra)
        decision, self._decision = self._decision, None
        if decision is None:  # said at this step's first evaluation dataset
            return
        say(state, f"n-best early stopping at step {state.global_step}: {self.stopping.explain(decision)}; "
                   f"keeping step {self.stopping_state.kept_step}")
        if decision.stop:
            control.should_training_stop = True

    def _decide(self, nbest: NBestEvalCallback, step: int) -> Dict[str, float]:
        """The rule's decision on the n-best callback's evaluation at ``step``; the metric it adds."""
        if nbest.last_result is None or nbest.last_step != step:
            raise RuntimeError(f"NBestEarlyStoppingCallback found no n-best evaluation at step {step}: "
                               f"the NBestEvalCallback (name {self.name!r}) was not hooked into the evaluation loop")
        try:
            self.stopping_state, self._decision = self.stopping.decide(
                self.stopping_state, stats=nbest.last_result.per_prompt, step=step, gold=nbest.evaluator.gold.digest())
        except InputError as err:
            raise ValueError(f"n-best early stopping: {err}") from None
        self._decided_step = step
        return {f"eval_{self.kept_step_key}": float(self.stopping_state.kept_step)}

    def _resumed(self, state: Any) -> State:
        """The rule's state to resume from at ``state.global_step``: the one saved for this callback in
        the Trainer state (``trainer_state.json``; else the one it was made with), checked against
        itself and the run (:meth:`~nbest_eval.training.early_stopping.EarlyStopping.restore`: the n-best
        callback's rule, measure, options, prompts and gold, the current step; its kept step one the
        Trainer evaluated at, :func:`_kept_step_problem`). One that fails is dropped with
        one warning naming why, and the rule counts from a fresh state."""
        data, problem = saved_entry(state, self.name, self.stopping.key, self.stopping.rule)
        if data is None and problem is None:
            data = self._given_state
        if data is None and problem is None:
            return State()
        if problem is None:
            evaluator = self._nbest_callback().evaluator
            try:
                restored = self.stopping.restore(data, evaluator.scorer, [p.id for p in evaluator.prompts],
                                                 state.global_step, evaluator.gold.digest())
                problem = _kept_step_problem(restored, state)
                if problem is None:
                    return restored
            except InputError as err:
                problem = str(err)
        logger.warning("n-best early stopping: the state saved at step %s is not used (%s); patience counts "
                       "from 0", state.global_step, problem)
        return State()

    def _nbest_callback(self) -> NBestEvalCallback:
        trainer = _find_trainer()
        found = [cb for cb in (trainer.callback_handler.callbacks if trainer else [])
                 if isinstance(cb, NBestEvalCallback) and cb.name == self.name]
        if not found:
            raise RuntimeError(f"NBestEarlyStoppingCallback needs an NBestEvalCallback named {self.name!r} among "
                               f"the Trainer's callbacks")
        return found[0]


def _kept_step_problem(restored: State, state: Any) -> Optional[str]:
    """What is wrong with the restored state's kept step in the Trainer state ``state``: it must be a
    step the Trainer evaluated at (its log history's eval entries), else the Trainer's best checkpoint
    (``metric_for_best_model="nbest_kept_step"``) would be some other step's. Unchecked where the log
    history holds no evaluation (nothing to check against)."""
    steps = {entry.get("step") for entry in getattr(state, "log_history", None) or []
             if isinstance(entry, dict) and any(str(key).startswith("eval_") for key in entry)}
    if not restored.seen or not steps or restored.kept_step in steps:
        return None
    return f"kept_step {restored.kept_step} is not a step the Trainer evaluated at"


def _measure(metric: str, name: Optional[str]) -> str:
    """The measure that ``metric`` names: a key, or the key as logged (``eval_map``, ``eval_{name}_map``)."""
    for head in ([f"eval_{name}_"] if name else []) + ["eval_"]:
        if metric.startswith(head):
            return metric[len(head):]
    return metric


def saved_entry(state: Any, name: Optional[str], key: str, rule: Optional[str] = None) -> Tuple[Any, Optional[str]]:
    """The rule state saved for the callback named ``name`` on measure ``key`` (by ``rule``, where
    given: another rule's state means something else) in a Trainer state
    (``stateful_callbacks``: an entry, or a list of entries, ``{"args": {...}}``), as saved, and what
    is wrong with the entries: (None, None) where none is saved."""
    callbacks = getattr(state, "stateful_callbacks", None) or {}
    saved = callbacks.get(NBestEarlyStoppingCallback.__name__) if isinstance(callbacks, dict) else None
    problem = None
    for entry in saved if isinstance(saved, list) else [] if saved is None else [saved]:
        args = entry.get("args") if isinstance(entry, dict) else None
        if not isinstance(args, dict):
            problem = f"an entry of {NBestEarlyStoppingCallback.__name__} is {entry!r:.60}, not {{'args': {{...}}}}"
        elif args.get("name") == name:
            if args.get("metric") not in (None, key):
                return None, f"it is a state for {args.get('metric')!r:.60}, not {key}"
            if rule is not None and args.get("rule") not in (None, rule):
                return None, f"it is a state for the {args.get('rule')!r:.60} rule, not {rule!r}"
            return args.get("stopping_state"), None
    return None, problem
