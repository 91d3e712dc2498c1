"""Scoring beside generation: n-best lists go to a helper process as soon as they exist.

Both training adapters (:mod:`nbest_eval.fairseq.task`, :mod:`nbest_eval.hf.evaluator`) hand each
list, or each batch of lists, to the helper while the model goes on generating, and take the
summed statistics when the validation's values are due::

    scoring = start_scoring(scorer, gold_prompts)            # once: the helper builds the references now
    tally = scoring.tally()                                  # one per validation (or valid step)
    tally.add([(prompt, hyps), ...])                         # returns at once
    stats, seconds, per_prompt = tally.total()               # waits for the last lists' scores

Why a process and not a thread: scoring is pure Python, and so is much of generation (fairseq's
beam search bookkeeping and decoding, the Hugging Face generate loop around small torch ops): a
scoring thread only takes turns with generation at the GIL, and on the demo models it saved no
wall time. The helper is a fresh ``python -c`` that imports only the metric core (not the training
script, as multiprocessing's spawn would, nor a fork of a process holding CUDA and threads). It
gets the scorer's recipe (its metric keys and ``options``) and the gold prompts once, builds their
reference statistics right away (while training runs), then scores requests in the order they
come and adds each prompt's statistics to the tally, from zero, exactly as a sequential loop over
the same lists does: the sums are bit for bit the same. Only the total and each prompt's
statistics (what an early-stopping rule resamples) travel back, so the calling process does
nothing while the helper works. The helper runs at nice 10: it needs an idle
core to hide scoring, and where there is none it waits for generation rather than slowing it (the
validation then waits for it at the end, and ``nbest_overhead_s`` shows that). Where no helper can
be started, scoring runs on the calling thread instead (:class:`InlineScoring`), with a warning.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple, Union

from .data import GoldPrompt, Hyp
from .metrics.registry import find
from .scorer import Scorer
from .stats import Stats

logger = logging.getLogger(__name__)

#: what a tally adds: (prompt, its n-best list) pairs
Items = Sequence[Tuple[GoldPrompt, Sequence[Hyp]]]


class Total(NamedTuple):
    """A tally's result: the summed statistics, the seconds spent scoring, and each prompt's
    statistics as (prompt id, stats) in the order added."""

    stats: Stats
    seconds: float
    per_prompt: List[Tuple[str, Stats]]

_CHILD = ("import sys; sys.path[0] = sys.argv[1]; from nbest_eval.pipeline import serve; "
          "serve(int(sys.argv[2]), int(sys.argv[3]))")
_SETUP = 0  # the token of the helper's answer when its set-up fails


class RemoteTraceback(Exception):
    """The helper's traceback, chained to an exception raised there (as concurrent.futures does)."""

    def __str__(self) -> str:
        return self.args[0]


class ScoringProcess:
    """A helper process that scores n-best lists of ``prompts`` like ``scorer``, in order.

    The helper builds its own scorer, ``Scorer(scorer.keys, **scorer.options)`` (a scorer itself
    would not pickle: metrics hold local functions), so its metrics must be registered on import of
    :mod:`nbest_eval`. The helper ends with :meth:`close`, when this object is garbage-collected, or
    at exit; errors raised there are raised by :meth:`Tally.total`, with the helper's traceback as
    their cause.
    """

    def __init__(self, scorer: Scorer, prompts: Sequence[GoldPrompt]):
        self.index = {prompt: i for i, prompt in enumerate(prompts)}
        recipe = (list(scorer.keys), scorer.options)
        setup = pickle.dumps((recipe, scorer.stat_names, list(prompts)), pickle.HIGHEST_PROTOCOL)
        request_read, request_write = os.pipe()
        response_read, response_write = os.pipe()
        root = str(Path(__file__).resolve().parent.parent)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _CHILD, root, str(request_read), str(response_write)],
                pass_fds=(request_read, response_write), stdin=subprocess.DEVNULL)
        except BaseException:
            for fd in (request_write, response_read):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(response_write)
        self._requests = Connection(request_write, readable=False)
        self._responses = Connection(response_read, writable=False)
        self._tokens = itertools.count(_SETUP + 1)
        self._send_lock = threading.Lock()
        self._send_lock.acquire()  # until the set-up is written: the helper takes a moment to start reading
        threading.Thread(target=self._send_setup, args=(pickle.dumps(list(sys.path)), setup),
                         name="nbest-scoring-setup", daemon=True).start()
        self._finalizer = weakref.finalize(self, _stop, self.process, self._requests, self._responses)

    def _send_setup(self, path: bytes, setup: bytes) -> None:
        try:
            self._requests.send_bytes(path)
            self._requests.send_bytes(setup)
        except OSError:
            pass  # the helper is gone: the next total says so
        finally:
            self._send_lock.release()

    @property
    def alive(self) -> bool:
        return self._finalizer.alive and self.process.poll() is None

    def tally(self) -> Tally:
        """A new running total (the helper forgets the earlier ones, collected or not)."""
        return Tally(self, next(self._tokens))

    def close(self) -> None:
        self._finalizer()

    def _send(self, message: Any) -> None:
        payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        try:
            with self._send_lock:
                self._requests.send_bytes(payload)
        except OSError:
            pass  # the helper is gone: the total says so

    def _total(self, token: int) -> Total:
        self._send(("total", token))
        while True:
            try:
                answer, ok, payload = self._responses.recv()
            except (EOFError, OSError):
                raise RuntimeError(f"the n-best scoring process stopped (exit code {self.process.wait()}); "
                                   f"see its messages above") from None
            if answer == _SETUP:
                raise RuntimeError("the n-best scoring process could not start") from _remote(*payload)
            if answer == token:
                if not ok:
                    raise _remote(*payload)
                return Total(*payload)
            # an earlier tally's total that its caller never read (interrupted): skip it


class Tally:
    """The statistics of the lists added since it was made, summed in the helper."""

    def __init__(self, process: ScoringProcess, token: int):
        self.process, self.token = process, token

    def add(self, items: Items) -> None:
        """Queue these lists for scoring; returns at once (unless the pipe to the helper is full).
        Hypotheses travel as plain tuples, which pickle several times faster than :class:`Hyp`."""
        index = self.process.index
        self.process._send(("add", self.token, [(index[p], [tuple(h) for h in hyps]) for p, hyps in items]))

    def total(self) -> Total:
        """The summed statistics (in the order added), the seconds the helper spent scoring them
        and each prompt's statistics; waits for the scoring to finish and raises what it raised."""
        return self.process._total(self.token)


class InlineScoring:
    """The interface of :class:`ScoringProcess`, scoring on the calling thread (no overlap)."""

    alive = True

    def __init__(self, scorer: Scorer):
        self.scorer = scorer

    def tally(self) -> InlineTally:
        return InlineTally(self.scorer)

    def close(self) -> None:
        pass


class InlineTally:
    """A :class:`Tally` that scores at :meth:`add`; an error is raised by :meth:`total`, as the
    helper's are."""

    def __init__(self, scorer: Scorer):
        self.scorer, self.seconds, self.error = scorer, 0.0, None
        self.stats, self.per_prompt = scorer.zero(), []

    def add(self, items: Items) -> None:
        if self.error is None:
            start = time.perf_counter()
            try:
                self.stats = _add(self.scorer, self.stats, items, self.per_prompt)
            except Exception as err:
                self.error = err
            self.seconds += time.perf_counter() - start

    def total(self) -> Total:
        if self.error is not None:
            raise self.error
        return Total(self.stats, self.seconds, self.per_prompt)


Scoring = Union[ScoringProcess, InlineScoring]


def start_scoring(scorer: Scorer, prompts: Sequence[GoldPrompt]) -> Scoring:
    """A :class:`ScoringProcess`, or :class:`InlineScoring` when no helper can be started or build
    the scorer (the values are the same; only the overlap is lost)."""
    try:
        if os.name != "posix":
            raise OSError("the helper process needs POSIX pipes")
        foreign = _registered_elsewhere(scorer)
        if foreign:
            raise ValueError(f"metric {foreign[0]!r} is registered outside nbest_eval, which the helper, a fresh "
                             f"interpreter, does not import")
        return ScoringProcess(scorer, prompts)
    except (OSError, ValueError) as err:
        logger.warning("n-best scoring runs on the calling thread, not beside generation: %s", err)
        return InlineScoring(scorer)


def _registered_elsewhere(scorer: Scorer) -> List[str]:
    """The scorer's metric keys registered by code outside this package (a training script's own
    metric): the helper builds its scorer from the keys after importing nbest_eval alone."""
    package = __name__.split(".")[0] + "."
    return [key for key in scorer.keys if not find(key)[0].factory.__module__.startswith(package)]


def _add(scorer: Scorer, total: Stats, items: Items, per_prompt: List[Tuple[str, Stats]]) -> Stats:
    """``total`` plus each list's statistics, one at a time: the additions of a sequential loop;
    each list's statistics appended to ``per_prompt``."""
    for prompt, hyps in items:
        stats = scorer.prompt_stats(prompt, hyps)
        per_prompt.append((prompt.id, stats))
        total = total + stats
    return total


def _remote(error: BaseException, text: str) -> BaseException:
    error.__cause__ = RemoteTraceback(text)
    return error


def _stop(process: subprocess.Popen, requests: Connection, responses: Connection) -> None:
    """End the helper: a closed request pipe ends its loop; kill it if it is still busy a second later."""
    for connection in (requests, responses):
        try:
            connection.close()
        except OSError:
            pass
    try:
        process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- the helper process ----------------------------------------------------------------------------------

def serve(request_fd: int, response_fd: int) -> None:
    """The helper's loop: set-up (sys.path, then the scorer's recipe and the prompts), warm-up, requests."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer; the closed pipe ends us
    os.nice(10)  # with no idle core, generation goes first: scoring then waits, it does not slow generation
    requests = Connection(request_fd, writable=False)
    responses = Connection(response_fd, readable=False)
    try:
        sys.path[:] = pickle.loads(requests.recv_bytes())
        (keys, options), stat_names, prompts = pickle.loads(requests.recv_bytes())
        scorer = Scorer(keys, **options)
        if scorer.stat_names != stat_names:
            raise RuntimeError("the scoring process built a scorer with other statistics than the caller's")
        _warm_up(scorer, prompts)
    except EOFError:
        return
    except Exception as err:
        _answer_error(responses, _SETUP, err)
        return
    tallies: Dict[int, List[Any]] = {}  # token -> [stats, seconds, error, per-prompt stats]
    while True:
        try:
            kind, token, *rest = pickle.loads(requests.recv_bytes())
        except EOFError:
            return
        if kind == "total":
            stats, seconds, error, per_prompt = tallies.pop(token, None) or (scorer.zero(), 0.0, None, [])
            if error is not None:
                _answer_error(responses, token, error)
            else:
                responses.send((token, True, (stats, seconds, per_prompt)))
            continue
        if token not in tallies:
            tallies.clear()  # a new tally: the earlier ones were abandoned
            tallies[token] = [scorer.zero(), 0.0, None, []]
        _score(scorer, tallies[token], [(prompts[i], [Hyp(*h) for h in hyps]) for i, hyps in rest[0]])


def _score(scorer: Scorer, tally: List[Any], items: Items) -> None:
    if tally[2] is not None:
        return  # the tally already failed
    start = time.perf_counter()
    try:
        tally[0] = _add(scorer, tally[0], items, tally[3])
    except Exception as err:
        tally[2] = err
    tally[1] += time.perf_counter() - start


def _warm_up(scorer: Scorer, prompts: List[GoldPrompt]) -> None:
    """Build every prompt's reference statistics now, not at the first validation: score a list
    of its three most frequent translations (three, so that the preference correlations are
    computed, importing scipy here too) and drop the result."""
    for prompt in prompts:
        scorer.prompt_stats(prompt, [Hyp(text, -float(rank)) for rank, (text, _) in enumerate(prompt.translations[:3])])


def _answer_error(responses: Connection, token: int, error: Exception) -> None:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        responses.send((token, False, (error, text)))
    except Exception:  # an exception that does not pickle: its text is enough
        responses.send((token, False, (RuntimeError(f"{type(error).__name__}: {error}"), text)))
