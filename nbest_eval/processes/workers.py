"""Scoring a stream of n-best lists, in this process or over worker processes (``score --jobs``).

Lists arrive one prompt at a time (:func:`nbest_eval.formats.iter_nbest`), so memory holds the gold,
the lists waiting in the workers' queues and each prompt's statistics, not the n-best file. From a
stream, a prompt always goes to the same worker (its gold position modulo the number of workers), so
each worker caches the references of its own prompts only. From a file, worker k reads and scores
part k of it itself (:class:`~nbest_eval.formats.FileParts`: a byte range cut at prompt boundaries
where the format allows), and only statistics travel between processes. The parts are merged in
file order, as one process reading the whole file would meet them: the first error in the file is
the one raised, and a prompt met in two parts means the file is not grouped. The statistics are
summed in gold order at the end, as :meth:`Scorer.score` sums them: the values are identical for
any number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import signal
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..data import Gold, GoldPrompt, InputError
from ..files.sigterm import sigterm_exits
from ..formats import FileParts
from ..formats.common import Group
from ..scorer import Scored, Scorer
from ..stats import Stats

#: hypotheses sent to a worker at a time, and batches a worker's queue holds before the reader waits
BATCH_HYPS, QUEUE_BATCHES = 2000, 4
POLL_SECONDS = 1.0
#: gold prompts per worker at least: starting a worker costs more than scoring a few prompts
MIN_PROMPTS_PER_WORKER = 100


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def score_stream(scorer: Scorer, gold: Gold, groups: Iterable[Group], *, jobs: int = 1,
                 keep_per_prompt: bool = False, parts: Optional[FileParts] = None) -> Scored:
    """Score every gold prompt; ``groups`` gives each listed prompt's list once (readers check), a
    prompt without one counts as an empty list. ``parts`` (a file, not a stream): the same lists,
    read in parts by the workers themselves (sending the lists costs more than reading them)."""
    if jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {jobs}")
    jobs = min(jobs, max(1, len(gold) // MIN_PROMPTS_PER_WORKER))  # never a worker with next to nothing to do
    if jobs == 1 or "fork" not in multiprocessing.get_all_start_methods():
        stats = {pid: _once(scorer, gold[pid], hyps) for pid, hyps in groups}
    else:
        with sigterm_exits():  # the finally that ends the workers runs (Ctrl-C: see _as_worker)
            stats = _in_workers(scorer, gold, groups, jobs) if parts is None else _by_parts(scorer, gold, parts, jobs)
    return scorer.summed(((p.id, stats.pop(p.id, None) or scorer.prompt_stats(p, [])) for p in gold), keep_per_prompt)


def _in_workers(scorer: Scorer, gold: Gold, groups: Iterable[Group], jobs: int) -> Dict[str, Stats]:
    # fork: the workers start with the scorer and the gold, nothing is pickled but lists and results
    context = multiprocessing.get_context("fork")
    owner = {prompt_id: k for k, shard in enumerate(_shards(gold, jobs)) for prompt_id in shard}
    tasks = [context.Queue(QUEUE_BATCHES) for _ in range(jobs)]
    results = context.Queue()
    workers = [context.Process(target=_work, args=(scorer, gold, tasks[k], results, os.getpid()), daemon=True)
               for k in range(jobs)]
    try:
        _start(workers)
        batches: List[List[Group]] = [[] for _ in range(jobs)]
        sizes = [0] * jobs
        for prompt_id, hyps in groups:
            k = owner[prompt_id]
            batches[k].append((prompt_id, hyps))
            sizes[k] += len(hyps) + 1
            if sizes[k] >= BATCH_HYPS:
                _put(tasks[k], batches[k], workers[k])
                batches[k], sizes[k] = [], 0
        for k in range(jobs):
            _put(tasks[k], batches[k], workers[k])
            _put(tasks[k], None, workers[k])
        return _collect(results, workers, scorer.stat_names)
    finally:
        _stop(workers)


#: a part's outcome: its prompts' statistics (as vectors), in file order, and the error that ended it
PartOutcome = Tuple[List[Tuple[str, List[float]]], Optional[Exception]]


def _by_parts(scorer: Scorer, gold: Gold, parts: FileParts, jobs: int) -> Dict[str, Stats]:
    """Part k of ``jobs``, read and scored by worker k; this process is worker 0."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [context.Process(target=_read_part, args=(scorer, gold, parts, k, jobs, results, os.getpid()),
                               daemon=True) for k in range(1, jobs)]
    try:
        _start(workers)
        outcomes: Dict[int, PartOutcome] = {0: _scored_part(scorer, gold, parts, 0, jobs)}
        return _merged(parts, jobs, outcomes, lambda: _receive(results, workers), scorer.stat_names)
    finally:
        _stop(workers)


def _merged(parts: FileParts, jobs: int, outcomes: Dict[int, PartOutcome],
            receive: Callable[[], Tuple[int, List[Tuple[str, List[float]]], Optional[Exception]]],
            names: Tuple[str, ...]) -> Dict[str, Stats]:
    """The parts' statistics, taken in part order (so in file order) as the parts arrive: a prompt
    already met in an earlier part raises :class:`Ungrouped`, a part's error is raised once every
    earlier part is merged (it is then the file's first), and no list at all is an error."""
    stats: Dict[str, Stats] = {}
    for part in range(jobs):
        while part not in outcomes:
            k, scored, error = receive()
            outcomes[k] = scored, error
        scored, error = outcomes.pop(part)
        for prompt_id, vector in scored:
            if prompt_id in stats:
                raise parts.ungrouped(prompt_id, part, jobs)
            stats[prompt_id] = Stats.from_vector(names, vector)
        if error is not None:
            raise error
    if not stats:
        raise parts.nothing_found()
    return stats


def _scored_part(scorer: Scorer, gold: Gold, parts: FileParts, part: int, jobs: int) -> PartOutcome:
    scored = []
    try:
        for pid, hyps in parts.read(part, jobs):
            scored.append((pid, _once(scorer, gold[pid], hyps).to_vector(scorer.stat_names)))
    except Exception as err:  # the merge raises it unless an earlier part has an error
        return scored, err
    return scored, None


def _read_part(scorer: Scorer, gold: Gold, parts: FileParts, part: int, jobs: int, results, parent: int) -> None:
    """A worker: its part's outcome, sent once; an error that cannot be pickled is sent as its text (the
    queue would drop it, and the reader would wait for the part forever)."""
    _as_worker(parent)  # it ends by itself, when its part is read
    scored, error = _scored_part(scorer, gold, parts, part, jobs)
    try:
        pickle.loads(pickle.dumps(error))  # both ways: the reader unpickles it
    except Exception:  # noqa: BLE001 - any failure to pickle or unpickle
        error = RuntimeError(f"{type(error).__name__}: {error}")
    results.put((part, scored, error))


def _start(workers) -> None:
    """Fork the workers with Ctrl-C and SIGTERM blocked (they inherit the mask, and unblock it once
    their handlers are set): one that had not yet set them when Ctrl-C reached the process group
    would die with a traceback, and one terminated that early (an error in the reader ends the
    workers) would run the reader's SIGTERM handler, and then the reader's own code, in the fork.
    Blocked, not ignored: a signal that reaches the reader meanwhile waits, and is delivered when
    this returns (or raises)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for worker in workers:
            worker.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _as_worker(parent: int) -> Callable[[], bool]:
    """In a worker: Ctrl-C, which reaches the whole process group, is for the reader, which ends the
    workers; SIGTERM ends a worker at once. Returns a test of whether the reader is gone (killed
    outright), after which a worker waiting for work ends too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # blocked by _start until now
    return lambda: os.getppid() != parent


def _shards(gold: Gold, jobs: int) -> List[Set[str]]:
    """Each worker's prompt ids: worker k scores the prompts at gold positions k, k + jobs, ..."""
    return [{prompt.id for prompt in gold.prompts[k::jobs]} for k in range(jobs)]


def _stop(workers) -> None:
    """End the workers that are still running (after an error, or a reader that stopped early)."""
    for worker in workers:
        if worker.pid is None:  # never started: Ctrl-C while the others were
            continue
        if worker.is_alive():
            worker.terminate()
        worker.join()


def _work(scorer: Scorer, gold: Gold, tasks, results, parent: int) -> None:
    """A worker: score the batches of its queue; after a failure, report it and drain the queue so
    that the reader never waits on it."""
    orphaned = _as_worker(parent)
    failed = False
    while True:
        try:
            batch = tasks.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if orphaned():
                return
            continue
        if batch is None:
            break
        if failed:
            continue
        try:
            results.put([(pid, _once(scorer, gold[pid], hyps).to_vector(scorer.stat_names)) for pid, hyps in batch])
        except Exception as err:  # sent to the reader, which raises it
            results.put(err)
            failed = True
    results.put(None)


def _once(scorer: Scorer, prompt: GoldPrompt, hyps) -> Stats:
    """A prompt's statistics, forgetting its cached references after: each prompt comes once."""
    stats = scorer.prompt_stats(prompt, hyps)
    scorer.release(prompt)
    return stats


def _put(tasks, item, worker) -> None:
    while True:
        try:
            tasks.put(item, timeout=POLL_SECONDS)
            return
        except queue.Full:
            _check_alive(worker)


def _collect(results, workers, names: Tuple[str, ...]) -> Dict[str, Stats]:
    stats: Dict[str, Stats] = {}
    finished = 0
    while finished < len(workers):
        message = _receive(results, workers)
        if message is None:
            finished += 1
        elif isinstance(message, BaseException):
            raise message
        else:
            stats.update((pid, Stats.from_vector(names, vector)) for pid, vector in message)
    return stats


def _receive(results, workers):
    """The next message of the workers, checking meanwhile that none has died."""
    while True:
        try:
            return results.get(timeout=POLL_SECONDS)
        except queue.Empty:
            for worker in workers:
                _check_alive(worker)


def _check_alive(worker) -> None:
    if not worker.is_alive() and worker.exitcode not in (0, None):
        raise RuntimeError(f"a scoring worker died (exit code {worker.exitcode}); try --jobs 1")
