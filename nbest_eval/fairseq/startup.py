"""Start-up checks of a ``translation_nbest`` training run's configuration: what would otherwise
fail after the first epoch, or train for nothing.

- ``--best-checkpoint-metric`` must be a key of the valid line (:func:`valid_line_keys`, derived
  from the run's own criterion and task, not listed here), with a "did you mean" for a typo;
- an n-best ``--best-checkpoint-metric`` needs ``--maximize-best-checkpoint-metric`` exactly when the
  registry says higher is better (MAP, BLEU, F1, ...; not an error rate such as ``e1``): otherwise
  fairseq keeps the worst value in ``checkpoint_best.pt`` while the stopping rule reads progress as
  none. A count (``num_ret``) is no quality to select on;
- while the task's rule decides, fairseq must save at every validation (:func:`saving_problem`):
  the rule keeps a validation by letting fairseq write ``checkpoint_best.pt``, which it writes only
  where it saves, so ``--save-interval 2`` could keep a validation never saved and end the run with
  no ``checkpoint_best.pt``. Refused rather than saved by the task: the task has no hold on the
  trainer and the epoch iterator that saving needs, and writing checkpoints beside fairseq would
  copy its naming, suffix, sharding and clean-up rules, where one option aligns the two;
- generation lengths beyond the model's positions (:func:`length_warning`): fairseq's beam search
  clamps them silently to the positions, so the run goes on and the log says which option to change.
"""

import difflib
import logging
from typing import Any, Dict, List, Optional, Sequence

from fairseq import metrics
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..data import InputError
from ..metrics import higher_is_better, is_metric_key
from ..training.early_stopping import EarlyStopping
from . import early_stopping

logger = logging.getLogger(__name__)

#: keys fairseq itself puts on every valid line: the trainer logs a ``loss`` when the criterion does
#: not (fairseq/trainer.py ``_reduce_and_log_stats``), train.py adds ``num_updates`` (``get_valid_stats``)
FAIRSEQ_VALID_KEYS = ("loss", "num_updates")


class NBestConfigError(ValueError):
    """A ``--nbest-*`` option, a checkpoint option or the gold does not fit the run; raised at start-up."""


def config_error(message: str) -> NBestConfigError:
    return NBestConfigError(f"translation_nbest: {message}")


class _AnyKey(dict):
    """A logging output that holds every key, as 1: what ``reduce_metrics`` makes of a validation
    step's output, whatever the criterion's keys are."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: Any) -> float:
        return 1.0

    def get(self, key: Any, default: Any = None) -> float:
        return 1.0


def check_run(task: Any, criterion: Any) -> Optional[EarlyStopping]:
    """Check a training run's checkpoint options (``task``: the ``translation_nbest`` task, with its
    config and scorer; ``criterion``: the run's) and return its early-stopping rule (None: fairseq
    decides alone); :class:`NBestConfigError` for what cannot work."""
    cfg = task.cfg
    keys = None if task.scorer is None else list(task.scorer.keys)
    check_best_checkpoint_metric(cfg.best_checkpoint_metric, cfg.maximize_best_checkpoint_metric,
                                 valid_line_keys(task, criterion), keys)
    try:
        stopping = early_stopping.rule_from_config(cfg, keys)
    except InputError as err:
        raise config_error(str(err)) from None
    if stopping is not None:
        options = run_options(cfg)
        problem = saving_problem(options) if options is not None else None
        if problem:
            raise config_error(f"early stopping ({stopping.describe()}) keeps a validation by having fairseq write "
                               f"checkpoint_best.pt, which fairseq writes only when it saves: {problem}")
        logger.info(f"translation_nbest: early stopping: {stopping.describe()}")
    return stopping


#: the run's options, outside the task's config, that say when fairseq validates and when it saves
SAVING_OPTIONS = {"save_interval": "checkpoint.save_interval",
                  "save_interval_updates": "checkpoint.save_interval_updates",
                  "no_save": "checkpoint.no_save", "validate_interval": "dataset.validate_interval",
                  "validate_interval_updates": "dataset.validate_interval_updates",
                  "disable_validation": "dataset.disable_validation"}


def run_options(cfg: Any) -> Optional[Dict[str, Any]]:
    """The :data:`SAVING_OPTIONS` of the run whose task config is ``cfg``: fairseq keeps the run's
    whole config as the task config's parent (its ``II(...)`` fields resolve there). None where
    ``cfg`` stands alone (a task made by hand): nothing is checked then."""
    if not OmegaConf.is_config(cfg):
        return None
    try:
        options = {name: OmegaConf.select(cfg, f"..{path}", default=None) for name, path in SAVING_OPTIONS.items()}
    except OmegaConfBaseException:  # no parent to go up to
        return None
    return None if any(value is None for value in options.values()) else options


def saving_problem(options: Dict[str, Any]) -> Optional[str]:
    """Which options let fairseq validate without saving (``options``: :data:`SAVING_OPTIONS`' values),
    or None. fairseq validates at the end of every ``--validate-interval``-th epoch and every
    ``--validate-interval-updates``-th update, and saves at the end of every ``--save-interval``-th
    epoch and every ``--save-interval-updates``-th update (validating there too, and when training
    stops), so each validation is saved iff the save intervals divide the validation intervals.
    ``--no-save`` and ``--disable-validation`` leave nothing to align."""
    if options["no_save"] or options["disable_validation"]:
        return None
    epochs, saved_epochs = options["validate_interval"], options["save_interval"]
    if epochs % saved_epochs:
        return (f"--validate-interval {epochs} validates at the end of epochs that --save-interval {saved_epochs} does "
                f"not save, so the kept validation could be one never saved; make --save-interval divide "
                f"--validate-interval (e.g. --save-interval {epochs}, or --validate-interval {saved_epochs})")
    updates, saved_updates = options["validate_interval_updates"], options["save_interval_updates"]
    if updates and (not saved_updates or updates % saved_updates):
        return (f"--validate-interval-updates {updates} validates at updates that --save-interval-updates "
                f"{saved_updates} does not save, so the kept validation could be one never saved; make "
                f"--save-interval-updates divide --validate-interval-updates (e.g. --save-interval-updates {updates})")
    return None


def valid_line_keys(task: Any, criterion: Any) -> Optional[List[str]]:
    """The keys of the run's valid line: what the task's ``reduce_metrics`` (its criterion's, fairseq's
    translation task's, the n-best metrics) logs for a validation step, plus fairseq's own. None
    when they cannot be derived (a criterion that needs its own keys' values): nothing is refused
    then. A criterion that logs the keys it finds by iterating over the output is read as logging
    none of them."""
    try:
        with metrics.aggregate(new_root=True) as agg:
            task.reduce_metrics([_AnyKey()], criterion)
            logged = [key for key in agg.keys() if not key.startswith("_")]
    except Exception as err:  # any criterion's code: no check rather than a refused run
        logger.info(f"translation_nbest: the valid line's keys could not be derived ({err!r}); "
                    f"--best-checkpoint-metric is checked against the n-best metrics only")
        return None
    return list(dict.fromkeys([*logged, *FAIRSEQ_VALID_KEYS]))


def check_best_checkpoint_metric(metric: Optional[str], maximize: bool, valid_keys: Optional[Sequence[str]],
                                 nbest_keys: Optional[Sequence[str]]) -> None:
    """Raise :class:`NBestConfigError` unless ``--best-checkpoint-metric`` ``metric`` is on the valid
    line (``valid_keys``; None: unknown, then only n-best keys are checked) and, if it is an n-best
    metric (``nbest_keys``: the ``--nbest-metrics``, None without a gold), a quality that ``maximize``
    (``--maximize-best-checkpoint-metric``) takes the right way, as the metric registry declares."""
    if not metric:
        return
    if is_metric_key(metric) and (nbest_keys is None or metric not in nbest_keys):
        if nbest_keys is None:
            raise config_error(f"--best-checkpoint-metric {metric} is an n-best metric, but no --nbest-gold is "
                               f"given, so no n-best validation runs; give --nbest-gold or another "
                               f"--best-checkpoint-metric")
        raise config_error(f"--best-checkpoint-metric {metric} is an n-best metric that is not logged: add it to "
                           f"--nbest-metrics (now {','.join(nbest_keys)})")
    if valid_keys is not None and metric not in valid_keys:
        close = difflib.get_close_matches(metric, valid_keys, n=1)
        guess = f"did you mean {close[0]}? " if close else ""
        raise config_error(f"--best-checkpoint-metric {metric} is not a key of the valid line: {guess}"
                           f"the valid line can have {', '.join(valid_keys)}")
    if is_metric_key(metric):
        _check_direction(metric, bool(maximize))


def _check_direction(metric: str, maximize: bool) -> None:
    """An n-best metric must be maximized iff higher is better; a count is refused."""
    higher = higher_is_better(metric)
    if higher is None:
        raise config_error(f"--best-checkpoint-metric {metric} is a count, not a quality to select checkpoints on: "
                           f"name a measure such as map")
    if higher == maximize:
        return
    flag = "--maximize-best-checkpoint-metric (checkpoint.maximize_best_checkpoint_metric=true in a hydra config)"
    kept, worse = ("lowest", "a rise") if higher else ("highest", "a fall")
    raise config_error(f"--best-checkpoint-metric {metric} is an n-best metric where "
                       f"{'higher' if higher else 'lower'} is better: {'add' if higher else 'remove'} {flag}; "
                       f"{'without' if higher else 'with'} it checkpoint_best.pt would hold the {kept} {metric} and "
                       f"early stopping would read {worse} as no progress")


def warn_about_lengths(plan: Any, generator: Any) -> None:
    """Log a warning when ``generator`` cannot generate its lengths (:func:`length_problem`). The
    task calls it once both exist (fairseq loads the valid split before or after building the model,
    by version); before, it does nothing."""
    problem = length_problem(plan, generator)
    if problem:
        logger.warning(f"translation_nbest: {problem}")


def length_problem(plan: Any, generator: Any, option: str = "--nbest-max-len") -> Optional[str]:
    """Why ``generator`` (an :class:`~.generation.NBestGenerator`) cannot generate its lengths for the
    longest source that ``plan`` (a :class:`~.generation.PromptPlan`) scores, in the caller's
    ``option`` names (:func:`length_warning`); None when it can, or either is not built yet."""
    if plan is None or generator is None or not plan.sources:
        return None
    return length_warning(generator.generator, generator.options, max(map(len, plan.sources.values())), option)


def length_warning(generator: Any, options: Any, longest_source: int, option: str = "--nbest-max-len") -> Optional[str]:
    """Why the beam search cannot generate the ``max_len_a``/``max_len_b`` lengths of ``options`` for a
    source of ``longest_source`` tokens, or None: fairseq's ``SequenceGenerator`` (``generator``)
    stops every hypothesis at its ``max_len`` (the model's target positions) minus 1. ``option``: how
    the caller spells them, ``OPTION-a`` and ``OPTION-b`` (training's ``--nbest-max-len-a``; select's
    ``--max-len-a``)."""
    positions = getattr(generator, "max_len", None)
    asked = int(options.max_len_a * longest_source + options.max_len_b)
    if not positions or asked <= positions - 1:
        return None
    return (f"{option}-a {options.max_len_a:g} {option}-b {options.max_len_b} allow {asked} tokens "
            f"for the longest scored valid source ({longest_source} tokens), beyond the model's {positions} target "
            f"positions: fairseq's beam search stops hypotheses at {positions - 1} tokens. Set {option}-a/-b "
            f"so that A * {longest_source} + B <= {positions - 1}, or train with a larger --max-target-positions")


# -- --nbest-mode async (issue 33) ------------------------------------------------------------------

ASYNC_DEVICES = "cpu, external or cuda[:N]"


def check_device(device: Optional[str]) -> None:
    if device not in (None, "cpu", "external") and not (device == "cuda" or device.startswith("cuda:")):
        raise InputError(f"--nbest-async-device {device!r} is none of {ASYNC_DEVICES}")


def check_async(task: Any) -> None:
    """Refuse what cannot work with ``--nbest-mode async`` (NBestConfigError, before the first epoch)."""
    problem = async_problem(task.cfg, task.cfg._get_root(), None if task.scorer is None else task.scorer.keys)
    if problem is not None:
        raise config_error(problem)


def async_problem(cfg: Any, root: Any, keys: Optional[List[str]]) -> Optional[str]:
    """Why ``--nbest-mode async`` cannot work with the task config ``cfg`` in the run's config ``root``
    (``keys``: the n-best keys logged, None without a gold), or None."""
    if keys is None:
        return "--nbest-mode async needs --nbest-gold: there is nothing to evaluate without it"
    if cfg.nbest_async_queue < 1:
        return f"--nbest-async-queue must be >= 1, got {cfg.nbest_async_queue}"
    if (root.checkpoint.keep_best_checkpoints or 0) > 0:
        return ("--keep-best-checkpoints keeps checkpoints by values fairseq sees at save time, which in async mode "
                "arrive later; the sidecar keeps the rule's best in SAVE_DIR/nbest-async/kept/")
    if str(root.lr_scheduler.get("_name")) == "reduce_lr_on_plateau" and cfg.best_checkpoint_metric in keys:
        return "--lr-scheduler reduce_lr_on_plateau on an n-best measure would depend on when results arrive"
    try:
        check_device(cfg.nbest_async_device)
    except InputError as err:
        return str(err)
    return None
