"""The Trainer callback: n-best metrics in every evaluation's metrics, before anything reads them.

The Trainer logs an evaluation's metrics *before* it calls ``on_evaluate``, and calls callbacks in
list order, so metrics added in ``on_evaluate`` would miss the logs and any callback listed earlier
(``EarlyStoppingCallback``). :class:`NBestEvalCallback` therefore computes its metrics inside the
Trainer's ``evaluation_loop``, before any of that: they land in the metrics dict that the Trainer
logs (``state.log_history``, each checkpoint's ``trainer_state.json``, the console, TensorBoard and
other reporters), hands to every callback's ``on_evaluate`` whatever its position, and uses for
``metric_for_best_model``. To get there it needs its Trainer, which the Trainer does not pass to
callbacks: the callback finds it on the call stack the first time the Trainer calls it
(``on_init_end`` for callbacks given to the constructor, ``on_train_begin`` for ``add_callback``),
or you call :meth:`NBestEvalCallback.attach`, or you use a trainer of :mod:`nbest_eval.hf.trainer`
(``nbest_eval=callback``), which overrides ``evaluation_loop`` instead of wrapping it on the
instance. When none of that works, training stops at ``on_train_begin`` with a message saying what
to do.
"""

from __future__ import annotations

import logging
import sys
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..data import Gold, InputError
from ..files.output import PLAIN_NAME, PathLike
from ..files.writable import check_can_make_folder
from ..formats import SUFFIXES
from ..signature import signatures
from .async_train import MODES, AsyncHandOff
from .checks import check_metric_for_best_model
from .console import samples_text, say
from .distributed import model_device
from .evaluator import NBestEvaluator
from .lists import ListSaver
from .result import NBestResult
from .settings import save_settings

logger = logging.getLogger(__name__)

#: formats the callback can save n-best lists in; all of them are read back by ``nbest-eval score``
SAVE_FORMATS = tuple(SUFFIXES)


def _find_trainer() -> Optional[Trainer]:
    """The Trainer whose method is on the call stack (callbacks are always called from one)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


_ATTACH_HELP = ("pass the callback to the Trainer constructor (callbacks=[...]), call "
                "callback.attach(trainer), or use nbest_eval.hf.NBestSeq2SeqTrainer(..., nbest_eval=callback)")


class NBestEvalCallback(TrainerCallback):
    """Adds n-best metrics to every Trainer evaluation (see the module docstring for how).

    Args:
        gold, tokenizer, prompts: as for :class:`NBestEvaluator`; ``tokenizer=None`` takes the
            Trainer's ``processing_class``.
        name: metric key infix: ``eval_{name}_map`` instead of ``eval_map`` (to use several callbacks).
        save_dir: when set, rank 0 writes each evaluation's n-best lists there as
            ``nbest-step{global_step}.{jsonl|tsv|txt}`` (``save_format``), never overwriting a file
            (a repeated step gets ``-2``, ...); ``nbest-eval score --gold GOLD --nbest FILE`` reads
            them back. When the prompts are not the whole gold, their gold is written beside them
            (``gold.txt``; ``gold-2.txt``... where an earlier run left the gold of other prompts).
            Saving never stops training: a list that cannot be saved (a full disk) is a warning.
        print_samples: print the n-best lists of the first N prompts at each evaluation (rank 0, on
            the console: :mod:`.console`), as fairseq's ``--nbest-print-samples``.
        mode: "loop" (generate and score at each evaluation) or "async": hand a snapshot to a sidecar
            instead, which evaluates it off the training clock (:mod:`.async_train`; docs/hf.md).
        async_device: where the sidecar generates ("cpu", "cuda:1"; default: the training device
            kind), started and stopped with training; "external": one you start (``nbest-eval watch``).
        async_queue, async_skip, async_timeout: at most this many snapshots wait (then training waits,
            or with ``async_skip`` older waiting ones are skipped); seconds to wait for the sidecar.
        **options: the other arguments of :class:`NBestEvaluator` (``num_beams``, ``metrics``, ...).
            Without ``precision``, it validates in the precision the Trainer trains in (``bf16=True``:
            ``"bf16"``, ``fp16=True``: ``"fp16"``): the Trainer runs the model's forward under
            autocast in that dtype, in its own evaluation and in this callback's generation alike.

    The metrics are ``eval_<key>`` for each metric key, plus ``eval_nbest_gen_s``,
    ``eval_nbest_score_s``, ``eval_nbest_overhead_s`` (the evaluation's wall time beyond
    generation: scoring runs beside it) and ``eval_nbest_prompts`` (the fairseq task's keys with
    the ``eval_`` prefix). ``last_result`` keeps the latest :class:`NBestResult` (``last_step``: its
    global step), ``saved`` the paths written. For early stopping on these measures, add a
    :class:`~nbest_eval.hf.early_stopping.NBestEarlyStoppingCallback`.
    """

    def __init__(self, gold: Union[PathLike, Gold], tokenizer: Any = None, prompts: Any = None, *,
                 name: Optional[str] = None, save_dir: Optional[PathLike] = None, save_format: str = "jsonl",
                 print_samples: int = 0, mode: str = "loop", async_device: Optional[str] = None,
                 async_queue: int = 2, async_skip: bool = False, async_timeout: float = 3600.0, **options: Any):
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if save_format not in SAVE_FORMATS:
            raise InputError(f"cannot save n-best lists as {save_format!r}; choose one of {', '.join(SAVE_FORMATS)}")
        if name is not None and not PLAIN_NAME.fullmatch(name):
            raise InputError(f"name {name!r} is not a plain name (letters, digits, '_', '-', '.', not first): it goes "
                             f"into metric keys and into file names in save_dir")
        if save_dir is not None:
            check_can_make_folder("save_dir", save_dir)  # now, not at the first evaluation
        if not isinstance(print_samples, int) or isinstance(print_samples, bool) or print_samples < 0:
            raise InputError(f"print_samples must be a number of prompts >= 0, got {print_samples!r}")
        self.evaluator = NBestEvaluator(gold, tokenizer, prompts, **options)
        self.name = name
        self.save_dir = None if save_dir is None else Path(save_dir)
        self.save_format = save_format
        self.print_samples = print_samples
        self._samples: Optional[str] = None  # the latest evaluation's samples, until on_evaluate prints them
        self.last_result: Optional[NBestResult] = None
        self.last_step: Optional[int] = None  # the global step of last_result
        self.saved: List[Path] = []
        self._trainer: Optional[weakref.ReferenceType] = None
        self._done_in_loop = False
        self._lists: Optional[ListSaver] = None  # made at the first save
        self.mode = mode
        self.handoff = AsyncHandOff(self, async_device, async_queue, async_skip, async_timeout) \
            if mode == "async" else None

    # -- wiring ---------------------------------------------------------------------------------

    @property
    def trainer(self) -> Optional[Trainer]:
        return None if self._trainer is None else self._trainer()

    def attach(self, trainer: Trainer) -> NBestEvalCallback:
        """Hook into ``trainer``'s evaluation loop (and register as its callback if needed)."""
        current = self.trainer
        if current is trainer:
            return self
        if current is not None:
            raise RuntimeError("this NBestEvalCallback is already attached to another Trainer; make one per Trainer")
        self._trainer = weakref.ref(trainer)
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        if hasattr(trainer, "nbest_callbacks"):  # a trainer of nbest_eval.hf.trainer: no wrapping
            if self not in trainer.nbest_callbacks:
                trainer.nbest_callbacks.append(self)
        else:
            for method in ("evaluation_loop", "prediction_loop"):  # prediction_loop: 4.x legacy loop
                if hasattr(trainer, method):
                    setattr(trainer, method, _LoopHook(self, getattr(trainer, method)))
        if self.evaluator.tokenizer is None:
            tokenizer = getattr(trainer, "processing_class", None) or getattr(trainer, "tokenizer", None)
            if tokenizer is not None and hasattr(tokenizer, "batch_decode"):
                self.evaluator.tokenizer = tokenizer
        self.match_precision(trainer.args)  # trainer.evaluate() before train() validates in it too
        return self

    def _attach_from_stack(self) -> bool:
        if self.trainer is None:
            trainer = _find_trainer()
            if trainer is not None:
                self.attach(trainer)
        return self.trainer is not None

    def on_init_end(self, args, state, control, **kwargs):
        self._attach_from_stack()

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._attach_from_stack():
            raise RuntimeError("NBestEvalCallback could not find the Trainer that runs it, so its metrics "
                               "would miss the logs and earlier callbacks; " + _ATTACH_HELP)
        if self.handoff is not None:
            self.handoff.check(args)
        self.check_setup(args)
        evaluator = self.evaluator
        logger.info("n-best evaluation signatures: %s", "  ".join(
            signatures(evaluator.scorer, evaluator.gold, evaluator.num_return_sequences).values()))
        if self.handoff is not None:
            self.handoff.start(self.trainer, args)
            return
        evaluator.start_scoring()  # the helper builds the reference statistics while the model trains

    def check_setup(self, args: Any) -> None:
        """Fail before training when the setup cannot work (ValueError, RuntimeError, InputError)."""
        trainer = self.trainer
        if self.evaluator.tokenizer is None:
            raise ValueError("NBestEvalCallback has no tokenizer: pass tokenizer= to it or "
                             "processing_class= to the Trainer")
        if trainer is None:
            return
        sharded = getattr(trainer, "is_fsdp_enabled", False)
        plugin = getattr(getattr(getattr(trainer, "accelerator", None), "state", None), "deepspeed_plugin", None)
        if sharded or getattr(plugin, "zero_stage", 0) == 3:
            raise RuntimeError("NBestEvalCallback does not support sharded parameters (FSDP, DeepSpeed "
                               "ZeRO-3): ranks generate different numbers of batches")
        check_metric_for_best_model(args, trainer)
        self.match_precision(args)
        model = _model_of(trainer)
        self.evaluator.size_batches(model_device(model))  # recorded from the first checkpoint on
        self.evaluator.check_lengths(model)
        self.evaluator.search(model)  # generation settings transformers refuses

    def match_precision(self, args: Any) -> None:
        """Validate in the Trainer's mixed precision (``args.bf16``/``args.fp16``) when no precision was
        given; refuse another one: the Trainer autocasts the model's forward in its own, which wins."""
        trained = "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else None
        given = self.evaluator.precision
        if given is None:
            self.evaluator.use_precision(trained)
        elif trained is not None and given != trained:
            raise InputError(f"precision={given!r}: the Trainer trains with {trained}=True and runs the model's "
                             f"forward under autocast in it, so validation would run in {trained} anyway; leave "
                             f"precision unset")

    def logged_keys(self, prefix: str) -> Dict[str, bool]:
        """The keys each evaluation logs under ``prefix``, True for the measures (better higher)."""
        scorer = self.evaluator.scorer
        head = f"{prefix}_{self.name}_" if self.name else f"{prefix}_"
        if self.handoff is not None:  # in training the measures arrive later, as log entries of their own step
            return {f"{head}nbest_pending": False}
        logged = NBestResult(dict.fromkeys(scorer.keys), scorer.zero(), 0.0, 0.0, 0).metrics(prefix, self.name)
        return {key: key[len(head):] in scorer.keys for key in logged}

    # -- evaluation -----------------------------------------------------------------------------

    def run(self, trainer: Trainer, prefix: str = "eval") -> Dict[str, float]:
        """Evaluate ``trainer``'s model now (every rank) and return the Trainer-style metrics."""
        result = self.evaluator.evaluate(_model_of(trainer), gather_nbest=self.save_dir is not None or
                                         self.print_samples > 0)
        self.last_result, self.last_step = result, trainer.state.global_step
        if self.save_dir is not None and result.nbest is not None:
            self._save(result, trainer.state.global_step)
        if self.print_samples and result.nbest is not None:  # printed in on_evaluate, after the metrics line
            prompts = self.evaluator.prompts[:self.print_samples]
            self._samples = samples_text(trainer.state.global_step, prompts, [result.nbest[p.id] for p in prompts],
                                         len(self.evaluator.prompts))
        metrics = result.metrics(prefix, self.name)
        logger.info("n-best evaluation at step %d: %s", trainer.state.global_step,
                    ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
        return metrics

    def _save(self, result: NBestResult, step: int) -> None:
        """Write the lists to ``save_dir`` (:class:`~nbest_eval.hf.lists.ListSaver`: never stops training)."""
        if self._lists is None:
            evaluator = self.evaluator
            self._lists = ListSaver(self.save_dir, self.save_format, self.name, evaluator.gold, evaluator.full_gold)
        path = self._lists.save(result.nbest, step)
        if path is not None:
            self.saved.append(path)

    def on_save(self, args, state, control, **kwargs):
        """Record the n-best settings in the checkpoint just saved, from the process that saves files
        (:mod:`nbest_eval.hf.settings`), so that ``nbest-eval select --hf`` scores it as training did."""
        if not args.should_save:
            return
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if folder.is_dir():
            save_settings(folder, self.evaluator, self.name)
        else:  # e.g. a hyperparameter search's run-N/ folders
            logger.warning("n-best settings not recorded: no checkpoint folder %s", folder)

    def _in_loop(self, trainer: Trainer, output: Any, description: str, prefix: str) -> Any:
        """Called right after the Trainer's evaluation loop, before it logs ``output.metrics``."""
        if description != "Evaluation":  # predict() passes "Prediction"
            return output
        if self.handoff is not None and self.handoff.active:  # else (evaluate() outside training) as the loop
            output.metrics.update(self.handoff.hand_off(trainer, _model_of(trainer), prefix))
            return output
        metrics = self.run(trainer, prefix)
        for callback in trainer.callback_handler.callbacks:  # e.g. the early stopping's nbest_kept_step
            after = getattr(callback, "after_nbest_evaluation", None)
            if after is not None:
                metrics.update(after(self, trainer.state))
        output.metrics.update(metrics)
        self._done_in_loop = True
        return output

    def stopping_callback(self) -> Any:
        """The NBestEarlyStoppingCallback of this callback's name among the Trainer's callbacks, or None."""
        trainer = self.trainer
        return next((cb for cb in (trainer.callback_handler.callbacks if trainer else [])
                     if hasattr(cb, "kept_step_key") and getattr(cb, "name", None) == self.name), None)

    def on_step_end(self, args, state, control, **kwargs):
        if self.handoff is not None:
            self.handoff.poll(state, control)

    def on_train_end(self, args, state, control, **kwargs):
        if self.handoff is not None:
            self.handoff.conclude(self.trainer, args, state)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.handoff is not None and self.handoff.active:
            self.handoff.poll(state, control)
            return
        if self._done_in_loop:
            self._done_in_loop = False
        elif self._attach_from_stack() and metrics is not None:
            self._late(state, metrics)
        if self._samples is not None:
            say(state, self._samples)
            self._samples = None

    def _late(self, state: Any, metrics: Dict[str, Any]) -> None:
        """Not hooked for this evaluation (an evaluate() before training by a callback added with
        add_callback): add the metrics now for the caller and the log history, and hook in for the
        next evaluations. Callbacks listed earlier and reporters have missed them this time."""
        extra = self.run(self.trainer, _prefix_of(metrics))
        metrics.update(extra)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra)
        logger.warning("NBestEvalCallback was not hooked into this evaluation; its metrics missed the "
                       "reporters and earlier callbacks this once. " + _ATTACH_HELP)


def _model_of(trainer: Trainer) -> Any:
    """The trainer's model, unwrapped (DDP...)."""
    accelerator = getattr(trainer, "accelerator", None)
    return trainer.model if accelerator is None else accelerator.unwrap_model(trainer.model)


def _prefix_of(metrics: Mapping[str, Any]) -> str:
    for key in metrics:
        if key.endswith("_runtime"):
            return key[: -len("_runtime")]
    return "eval"


class _LoopHook:
    """``trainer.evaluation_loop`` wrapped on the instance: the original loop, then the callback."""

    def __init__(self, callback: NBestEvalCallback, loop: Callable):
        self.callback, self.__wrapped__ = callback, loop

    def __call__(self, dataloader, description, *args, **kwargs):
        output = self.__wrapped__(dataloader, description, *args, **kwargs)
        prefix = kwargs.get("metric_key_prefix", args[2] if len(args) > 2 else "eval")
        trainer = self.callback.trainer
        if trainer is None:
            return output
        return self.callback._in_loop(trainer, output, description, prefix)
