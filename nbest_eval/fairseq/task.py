"""fairseq task ``translation_nbest``: n-best validation, checkpoint selection and early stopping.

    fairseq-train DATA --user-dir "$(nbest-eval user-dir)" --task translation_nbest --nbest-gold valid.gold.txt \\
        --best-checkpoint-metric map --maximize-best-checkpoint-metric --patience 5 ...

At every validation the model being trained decodes the valid split with fairseq's batched beam
search (:mod:`nbest_eval.fairseq.generation`) inside ``valid_step``, as ``--eval-bleu`` does, and
each n-best list is scored against the STAPLE gold. Each worker scores its own batches; the
scorer's additive statistics travel in the logging outputs (summed across workers by fairseq, as
tensors) and are turned into metric values in ``reduce_metrics``, so every worker logs the values
that one process would. Scoring runs in a helper process (:mod:`nbest_eval.processes.pipeline`) beside
generation: each list is handed over as soon as it is decoded, and the step waits only for the
last lists' scores. The metric keys (``map``, ``bleu_1x1``, ``bleu_100x100``, ``wf1``, ...) are
logged on the valid line, where ``--best-checkpoint-metric`` finds them, along with
``nbest_prompts`` (the prompts scored), ``nbest_gen_s`` and ``nbest_score_s`` (seconds spent
generating and scoring) and ``nbest_overhead_s`` (the wall time beyond generation), summed over
workers and batches. An undefined value is logged as 0.

With ``--patience P`` and an n-best ``--best-checkpoint-metric``, ``--nbest-stopping``'s rule
(:mod:`nbest_eval.training.early_stopping`; default ``proportional``) decides when to stop and what
``checkpoint_best.pt`` holds, from the per-prompt statistics (summed over workers like the rest), and
fairseq carries it out (:mod:`nbest_eval.fairseq.early_stopping`); the valid line's ``best_{metric}`` is
the kept validation's value, ``nbest_kept_update`` its update. The rule's state is saved in checkpoints
and restored on resume; the end of training says what ``checkpoint_best.pt`` holds and why. The run's
options are checked before the first epoch (:mod:`.startup`); ``--nbest-print-samples N`` logs N n-best
lists at each validation (:mod:`.samples`). Importing this module registers the task once and lets
fairseq's safe checkpoint loading accept fairseq checkpoints (:mod:`nbest_eval.fairseq.safe_load`).
"""

# no "from __future__ import annotations": fairseq reads the config dataclass field types at run time

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from fairseq import metrics, utils
from fairseq.dataclass import ChoiceEnum
from fairseq.distributed import utils as distributed_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask
from omegaconf import II

from ..data import InputError, NBest
from ..formats import read_gold
from ..metrics.base import N_PROMPTS
from ..processes.pipeline import Scoring, running
from ..scorer import GEN_SECONDS, PROMPTS, VALIDATION_METRICS, Scorer, parse_metric_list
from ..signature import signatures
from ..significance import DEFAULT_ALPHA, PerPrompt
from ..stats import Stats
from ..training.early_stopping import DEFAULT_RULE, RULES, EarlyStopping, State, rules_help
from ..training.matching import MAP_MODES
from . import early_stopping, save_dir
from .async_train import AsyncTrainer
from .generation import TIMINGS, NBestGenerator, NBestOptions, plan_dataset, score_batch  # noqa: F401 (TIMINGS: re-exported)
from .safe_load import allow_fairseq_checkpoints, trust_checkpoints_in_this_run
from .samples import Samples
from .scorer_options import GenerationConfig, scorer_options
from .startup import NBestConfigError, check_async, check_run, config_error, warn_about_lengths  # noqa: F401 (NBestConfigError: re-exported)

logger = logging.getLogger(__name__)

#: prefix of the per-statistic logging-output keys (hidden from the log: fairseq skips "_" keys)
STAT_PREFIX = "_nbest_"

allow_fairseq_checkpoints()  # resume and checkpoint loading, under torch's safe loader


@dataclass
class TranslationNBestConfig(GenerationConfig):
    """fairseq's translation options, the scorer's and the generation's (:mod:`.scorer_options`), and these."""

    nbest_gold: Optional[str] = field(
        default=None,
        metadata={"help": "STAPLE gold file (ID|prompt, then translation|weight lines) for the first "
                          "--valid-subset; without it the task is plain translation"})
    nbest_map: ChoiceEnum(list(MAP_MODES)) = field(
        default="id",
        metadata={"help": "how valid lines find their gold prompt: 'id' (the prompt with the decoded line's text, "
                          "else the one whose id is prompt_ + md5 of the lowercased line, as STAPLE makes ids) or "
                          "'order' (line i is gold prompt i)"})
    nbest_metrics: str = field(
        default=",".join(VALIDATION_METRICS),
        metadata={"help": "comma-separated nbest-eval metric keys to log, e.g. map,rr,p1,ndcg10,wf1,"
                          "bleu_1x1,bleu_100x100 (see `nbest-eval score --help`)"})
    nbest_remove_bpe: Optional[str] = field(
        default=None,
        metadata={"help": "remove BPE from sources and hypotheses before matching and scoring, as fairseq's "
                          "--post-process: e.g. sentencepiece, subword_nmt, '@@ '"})
    nbest_detok: str = field(
        default="space",
        metadata={"help": "detokenizer applied after BPE removal: 'space' (none) or any fairseq tokenizer, "
                          "e.g. 'moses' (needs sacremoses)"})
    nbest_max_prompts: Optional[int] = field(
        default=None,
        metadata={"help": "score only the first N distinct prompts of the valid split (a fixed subset, for "
                          "speed); the loss still uses the whole split"})
    nbest_save_dir: Optional[str] = field(
        default=None,
        metadata={"help": "write each validation's n-best lists here as TSV (prompt_id, rank, score, "
                          "hypothesis) named by epoch and update, plus the scored gold, so that "
                          "`nbest-eval score` re-scores them; files are never overwritten"})
    nbest_print_samples: int = field(
        default=0,
        metadata={"help": "log the n-best lists of the first N prompts of each validation (worker 0), a + marking "
                          "the gold translations, as --eval-bleu-print-samples prints hypotheses"})
    nbest_trust_checkpoints: bool = field(
        default=False,
        metadata={"help": "load checkpoints (resume, --restore-file) with full unpickling, which runs any code "
                          "stored in them; by default only the types fairseq checkpoints hold are allowed. Only "
                          "for checkpoints you made"})
    nbest_stopping: Optional[ChoiceEnum(list(RULES))] = field(
        default=None,
        metadata={"help": f"early-stopping rule with --patience P when --best-checkpoint-metric is an n-best measure "
                          f"(default: {DEFAULT_RULE}); it also decides what checkpoint_best.pt holds. {rules_help()}"})
    nbest_mode: ChoiceEnum(["loop", "async"]) = field(
        default="loop",
        metadata={"help": "'loop': generate and score in each validation, as training waits; 'async': hand a "
                          "weights-only snapshot to SAVE_DIR/nbest-async/ instead, for a sidecar (nbest-eval watch) "
                          "to evaluate while training goes on, with the same values, verdict and kept checkpoint"})
    nbest_async_device: Optional[str] = field(
        default=None,
        metadata={"help": "with --nbest-mode async: where the sidecar, started and stopped with training, "
                          "generates ('cpu', 'cuda:N'; default: the training device), or 'external': start "
                          "`nbest-eval watch SAVE_DIR` yourself (another machine on a shared filesystem)"})
    nbest_async_queue: int = field(
        default=2, metadata={"help": "with --nbest-mode async: at most this many snapshots wait for the sidecar; "
                                     "training waits for room (or see --nbest-async-skip)"})
    nbest_async_skip: bool = field(
        default=False,
        metadata={"help": "with --nbest-mode async: when the queue is full, drop the waiting snapshots that no sidecar "
                          "has started on instead of waiting (patience then counts evaluated validations only)"})
    nbest_async_timeout: float = field(
        default=3600.0,
        metadata={"help": "with --nbest-mode async: seconds to wait for the sidecar (room in the queue; the queue "
                          "drained at the end of training)"})
    nbest_stopping_alpha: float = field(
        default=DEFAULT_ALPHA, metadata={"help": "significance level of the early-stopping rule's tests"})
    nbest_stopping_warmup: Optional[str] = field(
        default=None,
        metadata={"help": "validations that count no patience: 'significant' (until one is significantly better "
                          "than the first; the default but for the strict rule) or a number"})
    # from the rest of the run's configuration
    valid_subset: str = II("dataset.valid_subset")
    save_dir: str = II("checkpoint.save_dir")
    restore_file: str = II("checkpoint.restore_file")
    continue_once: Optional[str] = II("checkpoint.continue_once")
    checkpoint_suffix: str = II("checkpoint.checkpoint_suffix")
    best_checkpoint_metric: str = II("checkpoint.best_checkpoint_metric")
    maximize_best_checkpoint_metric: bool = II("checkpoint.maximize_best_checkpoint_metric")
    patience: int = II("checkpoint.patience")


@register_task("translation_nbest", dataclass=TranslationNBestConfig)
class TranslationNBestTask(TranslationTask):
    """:class:`~fairseq.tasks.translation.TranslationTask` that also scores beam n-best lists
    against a STAPLE gold at every validation (see the module docstring)."""

    cfg: TranslationNBestConfig

    @classmethod
    def setup_task(cls, cfg: TranslationNBestConfig, **kwargs):
        task = super().setup_task(cfg, **kwargs)
        if cfg.nbest_trust_checkpoints and not kwargs.get("from_checkpoint"):
            trust_checkpoints_in_this_run()
        task.training_run = not kwargs.get("from_checkpoint")  # a loaded checkpoint may override the metrics
        return task

    def build_criterion(self, cfg, **kwargs):
        """fairseq builds the criterion after the model and before the first epoch: the run's
        checkpoint options are checked here, against the valid line this criterion makes, and the
        early-stopping rule is set up."""
        criterion = super().build_criterion(cfg, **kwargs)
        if self.training_run:
            self.stopping = check_run(self, criterion)
            if self.cfg.nbest_mode == "async":
                check_async(self)
                self.handoff = AsyncTrainer(self, self.stopping)
                early_stopping.at_end_of_training(self.handoff.conclude)
            elif self.stopping is not None:
                early_stopping.at_end_of_training(self._conclude)
        return criterion

    def __init__(self, cfg: TranslationNBestConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self.gold = self.scorer = self.plan = None
        self.nbest_generator: Optional[NBestGenerator] = None
        self.nbest_subset = (cfg.valid_subset or "valid").split(",")[0]
        self._scoring: Optional[Scoring] = None
        self.handoff: Optional[AsyncTrainer] = None  # --nbest-mode async, in training
        self.training_run = False  # set by setup_task
        try:
            if cfg.nbest_print_samples < 0:
                raise InputError(f"--nbest-print-samples must be >= 0, got {cfg.nbest_print_samples}")
            self.samples = Samples(cfg.nbest_print_samples)
            self.nbest_options = NBestOptions.from_cfg(cfg)
            if cfg.nbest_gold:
                self.gold = read_gold(cfg.nbest_gold)
                #: one scorer for the whole run (the scoring process builds its own from its options)
                self.scorer = Scorer(parse_metric_list(cfg.nbest_metrics), **scorer_options(cfg))
        except (InputError, ValueError) as err:
            raise config_error(str(err)) from None
        if self.gold is None:
            logger.warning("translation_nbest: no --nbest-gold given, so no n-best validation")
        self._subset_index = 0
        self._valid_epoch = None
        self._collected: NBest = {}
        self._resume_checked = False
        #: the early-stopping rule when this task decides (set up for training), its state, and the
        #: validation's per-prompt statistics it tests
        self.stopping: Optional[EarlyStopping] = None
        self.stopping_state = State()
        self._rows: Optional[torch.Tensor] = None  # this validation's per-prompt statistics, summed over workers

    # -- set-up -------------------------------------------------------------------------------

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        if self.gold is not None and split == self.nbest_subset:
            start = time.perf_counter()
            try:
                self.plan = plan_dataset(
                    self.datasets[split], self.src_dict, self.gold, mode=self.cfg.nbest_map,
                    max_prompts=self.cfg.nbest_max_prompts, split=split,
                    remove_bpe=self.cfg.nbest_remove_bpe, detok=self.cfg.nbest_detok,
                    lang=self.cfg.source_lang)
            except InputError as err:
                raise config_error(f"--nbest-gold does not fit the '{split}' split: {err}") from None
            self._stop_scoring()  # it knows the previous plan's prompts
            log = logger.warning if self.plan.unmatched else logger.info
            log(f"translation_nbest: '{split}' against {self.cfg.nbest_gold}: {self.plan.summary()} "
                f"({time.perf_counter() - start:.1f}s)")
            logger.info("translation_nbest: signatures: " +
                        "  ".join(signatures(self.scorer, self.plan.gold, self.nbest_options.size).values()))
            if self.cfg.nbest_save_dir:
                self._prepare_save_dir()
            warn_about_lengths(self.plan, self.nbest_generator)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self.gold is not None:
            # holds the model itself (not a distributed wrapper): it decodes with the current weights
            self.nbest_generator = NBestGenerator(self, [model], self.nbest_options)
            warn_about_lengths(self.plan, self.nbest_generator)
        return model

    # -- validation -----------------------------------------------------------------------------

    def begin_valid_epoch(self, epoch, model):
        super().begin_valid_epoch(epoch, model)
        self._valid_epoch, self._subset_index, self._collected, self._rows = epoch, 0, {}, None

    def _scoring_now(self) -> bool:
        subsets = (self.cfg.valid_subset or "valid").split(",")
        current = subsets[self._subset_index] if self._subset_index < len(subsets) else None
        return current in (None, self.nbest_subset) and self.plan is not None

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if self.scorer is None:
            return loss, sample_size, logging_output
        stats, seconds, per_prompt = self.scorer.zero(), dict.fromkeys(TIMINGS, 0.0), []
        if self._scoring_now() and self.nbest_generator is not None and self.handoff is None:
            stats, seconds, per_prompt = self._generate_and_score(sample)
        # every worker sends the same keys in the same order (fairseq sums them position-wise),
        # zeros included: a batch without prompts to score, or another valid subset
        for name in self.scorer.stat_names:
            logging_output[STAT_PREFIX + name] = stats[name]
        for key in TIMINGS:
            logging_output[STAT_PREFIX + key] = seconds[key]
        if self.stopping is not None:
            logging_output[early_stopping.ROWS] = early_stopping.rows_tensor(self.plan, self.scorer, per_prompt)
        return loss, sample_size, logging_output

    def _generate_and_score(self, sample) -> Tuple[Stats, Dict[str, float], List[Tuple[str, Stats]]]:
        """The batch's statistics, timings and per-prompt statistics (:func:`.generation.score_batch`,
        which the sidecar's evaluator runs too); its lists are kept for saving and samples."""
        batch = score_batch(self.nbest_generator, self.plan, self._start_scoring().tally(), sample)
        if self.cfg.nbest_save_dir:
            for prompt, hyps in batch.nbest.items():
                self._collected.setdefault(prompt, hyps)
        self.samples.take(batch.nbest)
        return batch.stats, batch.seconds, batch.per_prompt

    def _start_scoring(self) -> Scoring:
        """The scoring process, started if it is not running: training starts it in
        :meth:`begin_epoch`, so it builds the gold's reference statistics during the first epoch."""
        self._scoring = running(self._scoring, self.scorer, self.plan.gold.prompts)
        return self._scoring

    def _stop_scoring(self) -> None:
        if self._scoring is not None:
            self._scoring.close()
            self._scoring = None

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if self.scorer is None or not any(STAT_PREFIX + GEN_SECONDS in log for log in logging_outputs):
            return  # training steps, or no gold

        def sum_logs(key):
            return sum(float(utils.item(log.get(key, 0))) for log in logging_outputs)

        for name in self.scorer.stat_names:
            metrics.log_scalar_sum(STAT_PREFIX + name, sum_logs(STAT_PREFIX + name))
        for key in TIMINGS:
            metrics.log_scalar_sum(key, sum_logs(STAT_PREFIX + key), priority=30, round=4)
        metrics.log_derived(PROMPTS, lambda meters: int(_meter_sum(meters, STAT_PREFIX + N_PROMPTS)), priority=25)
        if self.stopping is not None:
            self._rows = early_stopping.add_rows(self._rows, logging_outputs)
        for key in self.scorer.keys:
            metrics.log_derived(key, self._derived(key))

    def _derived(self, key: str):
        scorer = self.scorer

        def value(meters) -> float:
            stats = {name: _meter_sum(meters, STAT_PREFIX + name) for name in scorer.stat_names}
            result = scorer.values(stats)[key]
            return 0.0 if result is None else float(result)  # fairseq needs a number at every validation

        return value

    def post_validate(self, model, stats, agg):
        """After each valid subset: check the count, write the n-best lists (``--nbest-save-dir``)."""
        scored = self._scoring_now()
        self._subset_index += 1
        if not scored or self.scorer is None:
            return
        if self.handoff is not None:
            self.handoff.after_validation(model, stats, self._valid_epoch)
            return
        n_scored = int(_meter_sum(agg, STAT_PREFIX + N_PROMPTS)) if STAT_PREFIX + N_PROMPTS in agg else 0
        if n_scored != len(self.plan):
            logger.warning(f"translation_nbest: {n_scored} of {len(self.plan)} prompts were scored in this "
                           f"validation; the logged values leave the others out. Causes: fairseq drops a last "
                           f"batch whose size is not a multiple of --required-batch-size-multiple (default 8; "
                           f"set it to 1), --max-valid-steps, --skip-invalid-size-inputs-valid-test")
        if self.cfg.nbest_save_dir:
            self._save_nbest(stats)
        self.samples.log(self.plan.gold, f"epoch {self._valid_epoch}, update {int(stats.get('num_updates', 0))}",
                         show=distributed_utils.get_global_rank() == 0)
        if self.stopping is not None:
            per_prompt = PerPrompt.from_matrix(self.scorer, self.plan.gold.ids(), self._rows.numpy())
            self.stopping_state = early_stopping.decide(self.stopping, self.stopping_state, per_prompt, stats,
                                                        self.plan.gold.digest())

    def _conclude(self) -> None:
        """The end-of-training line: what checkpoint_best.pt holds, and why."""
        logger.info(f"translation_nbest: checkpoint_best.pt: "
                    f"{self.stopping.conclusion(self.stopping_state, unit='update')}")

    # -- n-best files -----------------------------------------------------------------------------

    def _prepare_save_dir(self) -> None:
        """Write the scored prompts' gold once; a different one already there, or a folder that cannot
        be made, stops the run.

        Every worker checks the folder, reads and compares (so all of them stop on a different gold,
        none waits for the others in a collective); only rank 0 writes, all or nothing."""
        try:
            save_dir.prepare(self.cfg.nbest_save_dir, self.nbest_subset, self.plan.gold,
                             write=distributed_utils.get_global_rank() == 0)
        except InputError as err:
            raise config_error(str(err)) from None

    def _save_nbest(self, stats: Dict[str, Any]) -> None:
        values = {key: float(stats[key]) for key in self.scorer.keys if key in stats}
        collected, all_values = self._collected, [values]
        world_size = distributed_utils.get_data_parallel_world_size()
        if world_size > 1:
            gathered: List[Any] = [None] * world_size
            torch.distributed.all_gather_object(gathered, (collected, values),
                                                group=distributed_utils.get_data_parallel_group())
            collected, all_values = {}, [part[1] for part in gathered]
            for part, _ in gathered:
                for prompt, hyps in part.items():
                    collected.setdefault(prompt, hyps)
        self._collected = {}
        if distributed_utils.get_global_rank() != 0:
            return
        if any(v != values for v in all_values):
            logger.warning(f"translation_nbest: workers logged different values: {all_values}")
        updates = int(stats.get("num_updates", 0))
        try:
            path = save_dir.save_validation(self.cfg.nbest_save_dir, self.nbest_subset, self.plan.gold, collected,
                                            self._valid_epoch, updates, values, values_by_worker=all_values)
        except (InputError, OSError) as err:  # a full disk or a vanished folder: saving never stops training
            logger.warning(f"translation_nbest: n-best lists of epoch {self._valid_epoch} (update {updates}) "
                           f"not saved: {err}; training goes on")
            return
        logger.info(f"translation_nbest: wrote {path} ({len(collected)} prompts)")

    # -- early-stopping state -------------------------------------------------------------------

    def state_dict(self):
        state = dict(super().state_dict())
        saved = early_stopping.state_to_save(self.cfg.best_checkpoint_metric, self.stopping, self.stopping_state)
        if saved is not None:
            state[early_stopping.STATE_KEY] = saved
        return state

    def load_state_dict(self, state_dict):
        """fairseq calls this only when it loads a checkpoint to use it (``load_model_ensemble_and_task``:
        generation, scoring, ``nbest-eval select``), never when training resumes, so the early-stopping
        state is dropped here: restoring it would only overwrite the running process's state.
        Resumed training reads it back in :meth:`begin_epoch`."""
        state = dict(state_dict or {})
        state.pop(early_stopping.STATE_KEY, None)
        super().load_state_dict(state)

    def begin_epoch(self, epoch, model):
        super().begin_epoch(epoch, model)
        if not self._resume_checked and self.handoff is None:  # async: the rule's state is the queue's
            self._resume_checked = True
            gold = self.plan.gold if self.plan else None
            restored = early_stopping.restore(self.cfg, self.stopping, gold.ids() if gold else [],
                                              gold.digest() if gold else None)
            if restored is not None:
                self.stopping_state = restored
        if self.handoff is not None:
            self.handoff.start(epoch)
        elif self.plan is not None:
            self._start_scoring()


def _meter_sum(meters, key: str) -> float:
    meter = meters[key] if key in meters else None
    return float(utils.item(meter.sum)) if meter is not None else 0.0
