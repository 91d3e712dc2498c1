"""``nbest-eval select``'s library entry point: :func:`select_checkpoints` scores checkpoints (or
n-best files) through the score cache (:class:`~nbest_eval.selection.checkpoint_files.ScoreCache`
of :class:`~nbest_eval.selection.cache_entry.CacheEntry`), chooses among them
(:func:`~nbest_eval.selection.choosing.select`), averages the best on request, and returns a
:class:`~nbest_eval.selection.report.SelectReport`. Where the lists come from (generation with a
framework, files) is the caller's ``generate``; this module imports no framework."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .. import __version__
from ..analysis.recall_precision import Curves, mean_curves
from ..analysis.systems import System, SystemTable
from ..data import Gold, InputError, NBest
from ..metrics import PARAMS
from ..scorer import Scorer
from ..signature import resampling, signatures
from ..significance import (
    BOOTSTRAP_RESAMPLES,
    DEFAULT_ALPHA,
    DEFAULT_SEED,
    PerPrompt,
    check_mean,
    get_test,
    interval_note,
    resolution_note,
)
from ..training.early_stopping import EarlyStopping
from .averaging import best_k
from .cache_entry import CacheEntry, relevance
from .checkpoint_files import ScoreCache, content_digest
from .choosing import judge_average, select
from .report import SelectReport, system_name
from .verdicts import Selection


@dataclass
class Averaging:
    """Average the ``k`` best checkpoints: ``make`` averages their parameters (paths, best first)
    and returns the average's path, which is then scored like a checkpoint."""

    k: int
    make: Callable[[List[str]], str]


def select_checkpoints(paths: Sequence[str], gold: Gold, scorer: Scorer, generate: Callable[[str], NBest], *,
                       key: str = "map", maximize: bool = True, test: str = "bs", n_samples: Optional[int] = None,
                       seed: Optional[int] = DEFAULT_SEED, alpha: float = DEFAULT_ALPHA, prefer: str = "best",
                       stopping: Optional[EarlyStopping] = None, cache: Optional[str] = None,
                       key_of_cache: Optional[Mapping[str, Any]] = None, average: Optional[Averaging] = None,
                       pr_curve: Optional[str] = None,
                       progress: Callable[[Sequence[str]], Iterable[str]] = lambda paths: paths) -> SelectReport:
    """Score ``paths`` (in training order; ``generate``: path -> n-best lists) on ``gold`` with
    ``scorer``, each through the cache file ``cache`` (None: remembered in this call only) keyed by
    ``key_of_cache`` (:func:`cache_key`; default: of no generation settings), and choose among them by ``key`` (see
    :func:`~nbest_eval.selection.choosing.select` for the test options). ``pr_curve``: the figure's
    path; the curves of the pick, the first and the last checkpoint are computed for it (``scorer``
    must have the ``iprec`` measures)."""
    check_mean(test, scorer, key)
    relevant = relevance(scorer, gold)
    key_of_cache = cache_key({}, gold, scorer) if key_of_cache is None else key_of_cache
    scores = ScoreCache(cache, key_of_cache,
                        lambda raw: CacheEntry.verified(raw, scorer, relevant), CacheEntry.as_json)

    def scored(path: str) -> Tuple[System, PerPrompt, int]:
        entry = scores.get_or_score(path, lambda: CacheEntry.of(
            scorer.score(gold, _generate(path, generate), keep_per_prompt=True), scorer))
        name = system_name(path)
        return (System(name, dict(entry.values), path), PerPrompt.from_matrix(scorer, gold.ids(), entry.stats, name),
                entry.nbest_size)

    systems, per_prompt, sizes = map(list, zip(*(scored(path) for path in progress(paths))))
    selection = select(per_prompt, key, maximize, test=test, n_samples=n_samples, seed=seed, alpha=alpha,
                       prefer=prefer, stopping=stopping)
    if average is not None:
        chosen = best_k(list(paths), [s.values.get(key) for s in systems], average.k, maximize)
        system, averaged, size = scored(average.make(chosen))
        judge_average(selection, per_prompt, averaged, [list(paths).index(p) for p in chosen])
        systems.append(system)
        sizes.append(size)
    resampled = resampling(test, selection.n_samples, seed, BOOTSTRAP_RESAMPLES)
    report = SelectReport(systems, selection, signatures(scorer, gold, max(sizes), resampled),
                          warnings=warnings(selection, len(per_prompt)), digests=scores.scored)
    if pr_curve:
        legends = report.curve_legends()
        report.pr_curve = Curves(mean_curves(SystemTable([s for s in systems if s.name in legends])), pr_curve)
    return report


def warnings(selection: Selection, checkpoints: int) -> List[str]:
    """Where the resamples are too few: for Holm over the checkpoints, or for a 95% interval."""
    test = get_test(selection.test)
    notes = [resolution_note(checkpoints - 1, selection.n_samples, selection.alpha) if test.resamples else None,
             interval_note(selection.n_samples if test.gives_intervals else BOOTSTRAP_RESAMPLES)]
    return [note for note in notes if note]


def cache_key(settings: Mapping[str, Any], gold: Gold, scorer: Scorer, data: Optional[str] = None) -> Dict:
    """Everything besides a checkpoint that its scores depend on, by content: a changed gold, prompt
    or setting, or re-preprocessed data (``data``: a fairseq data directory) must not reuse old
    results. ``settings``: the resolved generation settings (recorded or given) by name; the scorer's
    own options hold every scorer setting, so none can be left out. (Entries keyed before they did
    match no key now: they are scored again, never reused.)"""
    source = {k: v for k, v in settings.items() if k != "metrics" and k not in PARAMS}
    if data:
        subset = source["subset"]
        source["data"] = {f: content_digest(os.path.join(data, f))
                          for f in sorted(os.listdir(data)) if f.startswith(("dict.", subset + "."))}
    return {"metrics": scorer.keys, "scorer": scorer.options, "source": source, "version": __version__,
            "gold": gold.digest()}


def _generate(path: str, generate: Callable[[str], NBest]) -> NBest:
    """A checkpoint problem that the loaders do not name (a broken config, a wrong model) is still
    an error naming the checkpoint, not a traceback."""
    try:
        return generate(path)
    except InputError:
        raise
    except Exception as err:  # whatever a framework raises on a bad checkpoint
        reason = (str(err).strip().splitlines() or [""])[0]
        raise InputError(f"cannot generate with this checkpoint ({type(err).__name__}: {reason})", path) from None
