"""Choosing among checkpoints from their per-prompt statistics: the best (the latest of equal
values, as fairseq's ``checkpoint_best.pt``), each checkpoint's verdict against it (a paired test
over prompts, Holm-corrected; a test of per-prompt values needs a mean), the pick under a preference, an
early-stopping rule replayed, an average judged. Results: :mod:`nbest_eval.selection.verdicts`."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..data import Gold, InputError
from ..formats import read_nbest
from ..scorer import Scorer
from ..significance import (
    BOOTSTRAP_RESAMPLES,
    DEFAULT_ALPHA,
    DEFAULT_SEED,
    PerPrompt,
    bootstrap_scores,
    check_mean,
    check_systems,
    get_test,
    interval,
    resamples_for,
)
from ..training.early_stopping import RULES, EarlyStopping
from .verdicts import Average, Choice, Selection, StoppingReplay, Verdict

PREFERENCES = ("best", "earliest-tied")


def best_index(values: Sequence[Optional[float]], maximize: bool = True) -> Optional[int]:
    """Index of the best value. The latest wins a tie, as with fairseq's ``checkpoint_best.pt``,
    which is rewritten whenever a validation is at least as good as the best so far."""
    best = None
    for i, value in enumerate(values):
        if value is not None and (best is None or value == values[best] or
                                  (value > values[best] if maximize else value < values[best])):
            best = i
    return best


def select(systems: Sequence[PerPrompt], key: str, maximize: bool = True, *, test: str = "bs",
           n_samples: Optional[int] = None, seed: Optional[int] = DEFAULT_SEED, alpha: float = DEFAULT_ALPHA,
           prefer: str = "best", stopping: Optional[EarlyStopping] = None) -> Selection:
    """Choose among ``systems`` (checkpoints in training order) by ``key``: see :class:`Selection`.
    ``n_samples`` defaults to enough for Holm over the checkpoints (:func:`resamples_for`)."""
    if prefer not in PREFERENCES:
        raise InputError(f"unknown preference {prefer!r}; use one of: {', '.join(PREFERENCES)}")
    n_samples = n_samples or resamples_for(len(systems) - 1, test, alpha)
    choice = choose(systems, key, maximize, test=test, n_samples=n_samples, seed=seed, alpha=alpha)
    pick = choice.best if prefer == "best" or choice.best is None else choice.tied[0]
    selection = Selection(key, maximize, choice, test, n_samples, seed, alpha, prefer, pick)
    if stopping is not None:
        selection.stopping = replay_stopping(stopping, systems, choice)
    return selection


def k_best(values: Sequence[Optional[float]], k: int, maximize: bool = True) -> List[int]:
    """The indices of the ``k`` best values, best first; of equal values the later first (as
    :func:`best_index`). Undefined values (None, NaN) are never among them."""
    scored = [i for i, value in enumerate(values) if value is not None and not math.isnan(value)]
    if k > len(scored):
        raise InputError(f"only {len(scored)} of the {len(values)} checkpoints have a value to rank them by, "
                         f"not {k}")
    return sorted(scored, key=lambda i: (values[i] if maximize else -values[i], i), reverse=True)[:k]


def judge_average(selection: Selection, systems: Sequence[PerPrompt], average: PerPrompt,
                  averaged: List[int]) -> Average:
    """The average of the checkpoints ``averaged`` (indices into ``systems``), tested against the
    best single checkpoint as the selection tested the others; kept as ``selection.average``."""
    verdict = judge_against_best([systems[selection.best], average], 0, selection.key, selection.test,
                                 selection.n_samples, selection.seed, selection.alpha)[1]
    selection.average = Average(list(averaged), verdict)
    return selection.average


def replay_stopping(stopping: EarlyStopping, systems: Sequence[PerPrompt], choice: Choice) -> StoppingReplay:
    """``stopping`` replayed on the checkpoints' statistics, its kept checkpoint judged against
    ``choice``'s best (the paired test's unadjusted p-value)."""
    decisions, stopped = stopping.replay(choice.values, systems if stopping.needs_statistics else None)
    kept = decisions[-1].kept if decisions else None
    p = None
    if kept is not None and choice.best is not None:
        p = 1.0 if kept == choice.best else choice.verdicts[kept].p_value
    return StoppingReplay(stopping, stopped, kept, p)


def replay_rules(systems: Sequence[PerPrompt], choices: Mapping[str, Choice], key: str = "map",
                 rules: Sequence[str] = RULES, patience: Sequence[int] = (3, 5, 10),
                 report: Sequence[str] = ("map", "bleu_100x100")) -> List[Dict[str, Any]]:
    """Every early-stopping rule on ``key`` (an n-best measure: higher is better) replayed at each
    patience, the evidence for the default rule: where it stops (an index; None: never), the index
    it keeps, each ``report`` measure's value there with its interval and p-value against that
    measure's best (``choices``: each measure's :class:`Choice`; 1 for the best itself), and the
    share of validations it saves."""
    out = []
    for rule in rules:
        for p in patience:
            replay = replay_stopping(EarlyStopping(key, rule, p), systems, choices[key])
            kept = replay.kept
            entry: Dict[str, Any] = {"rule": rule, "patience": p, "stopped_after": replay.stopped_after, "kept": kept,
                                     "saved": 0.0 if replay.trained is None else 1 - replay.trained / len(systems)}
            for measure in report:
                choice = choices[measure]
                interval = choice.verdicts[kept].interval
                entry[measure] = {"value": choice.values[kept], "ci": None if interval is None else interval.as_dict(),
                                  "p_vs_best": 1.0 if kept == choice.best else choice.verdicts[kept].p_value}
            out.append(entry)
    return out


def choose(systems: Sequence[PerPrompt], key: str, maximize: bool = True, **test: Any) -> Choice:
    """The checkpoint ``key`` picks (:func:`best_index`) and the verdicts against it
    (:func:`judge_against_best`, ``test``: its options), from per-prompt statistics alone."""
    if systems:
        check_systems(systems[0], systems[1:], [key])
    values = [system.scores()[key] for system in systems]
    best = best_index(values, maximize)
    return Choice(values, best, [] if best is None else judge_against_best(systems, best, key, **test))


def choices_of_files(gold: Gold, paths: Sequence[str], keys: Sequence[str], minimize: Sequence[str] = (),
                     **test: Any) -> Dict[str, Choice]:
    """:func:`choose` for each of ``keys`` among n-best files (one per checkpoint or validation, in
    training order), e.g. the lists a training run saved at each validation."""
    systems = systems_of_files(gold, paths, keys)
    return {key: choose(systems, key, key not in minimize, **test) for key in keys}


def systems_of_files(gold: Gold, paths: Sequence[str], keys: Sequence[str]) -> List[PerPrompt]:
    """Each n-best file's per-prompt statistics on ``keys``, named by path (two folders may hold one
    file name)."""
    scorer = Scorer(list(keys))
    return [PerPrompt(scorer, scorer.score(gold, read_nbest(path, gold), keep_per_prompt=True).per_prompt,
                      str(path)) for path in paths]


def judge_against_best(systems: Sequence[PerPrompt], best: int, key: str, test: str = "bs",
                       n_samples: Optional[int] = None, seed: Optional[int] = DEFAULT_SEED,
                       alpha: float = DEFAULT_ALPHA) -> List[Verdict]:
    """Each checkpoint's :class:`Verdict` on ``key`` against ``systems[best]``: a paired ``test``
    with ``n_samples`` resamples (default: enough for Holm over the checkpoints, see
    :func:`resamples_for`), intervals from the bootstrap draws (the paired bootstrap's own); tied
    means Holm's p-value is at least ``alpha`` (the best is tied with itself; a checkpoint where
    ``key`` is undefined is tied with nothing)."""
    others = [s for i, s in enumerate(systems) if i != best]
    check_systems(systems[best], others, [key])
    paired = get_test(test)
    check_mean(paired, systems[best].scorer, key)
    n_samples = n_samples or resamples_for(len(others), paired, alpha)
    tested = paired.run(systems[best], others, n_samples, seed, [key]) if others else {}
    own = [systems[best]] if paired.gives_intervals else list(systems)  # the test's draws give the others'
    resampled = bootstrap_scores(own, n_samples if paired.gives_intervals else BOOTSTRAP_RESAMPLES, seed, [key])
    intervals = {system.name: interval(found[key]) for system, found in zip(own, resampled)}
    verdicts = []
    for i, system in enumerate(systems):
        found = intervals[system.name] if system.name in intervals else tested[system.name][key].interval
        if i == best:
            verdicts.append(Verdict(found, None, None, True))
            continue
        result = tested[system.name][key]
        tied = result.score is not None and (result.p_holm is None or result.p_holm >= alpha)
        verdicts.append(Verdict(found, result.p_value, result.p_holm, tied))
    return verdicts


def check_test(scorer: Scorer, key: str, test: str) -> None:
    """:func:`~nbest_eval.significance.check_mean` in this module's older argument order."""
    check_mean(test, scorer, key)
