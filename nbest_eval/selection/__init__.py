"""Choosing a checkpoint: one library result for ``nbest-eval select``, the training adapters'
summaries and ``scripts/staple_en_pt.py``.

- :mod:`.choosing`: from each checkpoint's per-prompt statistics
  (:class:`~nbest_eval.significance.PerPrompt`, in training order), :func:`select` returns a
  :class:`Selection` (:mod:`.verdicts`): the best checkpoint on the selection measure, every
  checkpoint's interval, p-value against the best and tie (a paired test over prompts,
  Holm-corrected), the pick under a preference, and, with an early-stopping rule
  (:mod:`nbest_eval.training.early_stopping`), where that rule would have stopped and what it kept.
- :mod:`.scoring`: :func:`select_checkpoints`, ``nbest-eval select``'s entry point: scores
  checkpoints (or n-best files) through the score cache and returns a :class:`SelectReport`
  (:mod:`.report`), which renders itself as text, JSON and CSV.
- Machinery: :mod:`.checkpoint_files` (training order, the cache, the link to the pick),
  :mod:`.cache_entry`, :mod:`.run_settings`, :mod:`.averaging`.
"""

from .choosing import (
    PREFERENCES,
    best_index,
    check_test,
    choices_of_files,
    choose,
    judge_against_best,
    judge_average,
    k_best,
    replay_rules,
    replay_stopping,
    select,
    systems_of_files,
)
from .report import SelectReport
from .scoring import Averaging, select_checkpoints
from .verdicts import Average, Choice, Selection, StoppingReplay, Verdict

__all__ = ["PREFERENCES", "Average", "Averaging", "Choice", "SelectReport", "Selection", "StoppingReplay",
           "Verdict", "best_index", "check_test", "choices_of_files", "choose", "judge_against_best",
           "judge_average", "k_best", "replay_rules", "replay_stopping", "select", "select_checkpoints",
           "systems_of_files"]
