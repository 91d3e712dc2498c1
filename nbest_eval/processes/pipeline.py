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

Requests go out from a sender thread, and answers come in on a reader thread, so adding lists
never blocks generation, even on a helper that has stopped reading. While it works the helper says
so at most once a second (after a prompt scored, or a prompt's references built); a total that has
seen no such sign for :data:`STALL_SECONDS` ends the helper and raises (a helper stopped by SIGSTOP,
or stuck). A helper that dies raises at the total with its last lines on stderr (which are also
shown as they come), or the signal that killed it.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any, Deque, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..data import GoldPrompt
from ..metrics.registry import find
from ..scorer import Scorer
from ..stats import Stats
from .scoring_helper import PROGRESS, SETUP, Items, add_stats

logger = logging.getLogger(__name__)


class Total(NamedTuple):
    """A tally's result: the summed statistics, the seconds spent scoring, and each prompt's
    statistics as (prompt id, stats) in the order added."""

    stats: Stats
    seconds: float
    per_prompt: List[Tuple[str, Stats]]


_CHILD = ("import sys; sys.path[0] = sys.argv[1]; from nbest_eval.processes.scoring_helper import serve; "
          "serve(int(sys.argv[2]), int(sys.argv[3]))")
#: how long a total waits without any sign of progress from the helper before it ends the helper
#: and raises. The helper gives one every HEARTBEAT_SECONDS while it works, between two prompts; on
#: the STAPLE en_pt dev gold (500 prompts, up to 720 translations each) the slowest prompt took 1.1 s
#: to build its references (the first, which imports scipy) and 0.01 s to score a 100-best list, so
#: 5 minutes leave room for a helper starved of CPU (it runs at nice 10) or slowed 100-fold, and
#: still end a validation hung on a stopped helper.
STALL_SECONDS = 300.0
POLL_SECONDS = 1.0
LAST_WORDS = 20  # lines of the helper's stderr kept for the error that says it died


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
                pass_fds=(request_read, response_write), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except BaseException:
            for fd in (request_write, response_read):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(response_write)
        self._tokens = itertools.count(SETUP + 1)
        self._link = _Link()
        self._outbox: queue.Queue = queue.Queue()
        self._outbox.put(pickle.dumps(list(sys.path)))
        self._outbox.put(setup)
        # the threads hold the link, not this object, which the finalizer ends when it is collected
        self._threads = [threading.Thread(target=target, args=args, name=f"nbest-scoring-{name}", daemon=True)
                         for name, target, args in (
                             ("send", _send_all, (Connection(request_write, readable=False), self._outbox, self._link)),
                             ("read", _read_all, (Connection(response_read, writable=False), self._link)),
                             ("stderr", _relay, (self.process.stderr, self._link)))]
        for thread in self._threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _stop, self.process, self._outbox, self._link)

    @property
    def alive(self) -> bool:
        return self._finalizer.alive and self.process.poll() is None

    def tally(self) -> Tally:
        """A new running total (the helper forgets the earlier ones, collected or not)."""
        return Tally(self, next(self._tokens))

    def close(self) -> None:
        self._finalizer()

    def ended(self) -> Optional[str]:
        """How the helper ended, where it ended by itself (killed while idle, e.g. by the out-of-memory
        killer): said once, as it is then closed; None while it runs or once closed."""
        return self._death() if self._finalizer.alive and self.process.poll() is not None else None

    def _send(self, message: Any) -> None:
        """Queue ``message`` for the sender thread: returns at once, whatever the helper is doing."""
        self._outbox.put(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))

    def _total(self, token: int) -> Total:
        self._send(("total", token))
        waiting = time.monotonic()
        while True:
            try:
                message = self._link.answers.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if time.monotonic() - max(waiting, self._link.progress) > STALL_SECONDS:
                    raise self._stalled() from None
                continue
            if message is None:  # the helper is gone (and stays gone for a later total)
                self._link.answers.put(None)
                raise RuntimeError(self._death()) from None
            answer, ok, payload = message
            if answer == SETUP:
                raise RuntimeError("the n-best scoring process could not start") from _remote(*payload)
            if answer == token:
                if not ok:
                    raise _remote(*payload)
                return Total(*payload)
            # an earlier tally's total that its caller never read (interrupted): skip it

    def _death(self) -> str:
        """What ended the helper: the signal that killed it, or its exit code and its last words."""
        code = self.process.wait()
        self._threads[2].join(timeout=POLL_SECONDS)  # the last lines it wrote
        words = "".join(self._link.last_words).rstrip()
        self.close()
        if code < 0:
            quiet = " (it wrote nothing: e.g. the out-of-memory killer)" if -code == signal.SIGKILL else \
                " (it wrote nothing)"
            return f"the n-best scoring process was killed by signal {-code} ({_signal_name(-code)})" + \
                (f"; its last words:\n{words}" if words else quiet)
        return f"the n-best scoring process stopped (exit code {code})" + \
            (f"; its last words:\n{words}" if words else ", writing nothing")

    def _stalled(self) -> RuntimeError:
        """The error for a helper that gave no sign of progress for STALL_SECONDS, which it ends."""
        how = "is stopped (SIGSTOP)" if _process_state(self.process.pid) == "T" else "is stuck or starved of CPU"
        self.close()
        return RuntimeError(f"the n-best scoring process (pid {self.process.pid}) has given no sign of progress "
                            f"for {STALL_SECONDS:g} s (nbest_eval.processes.pipeline.STALL_SECONDS) and {how}: "
                            "it was ended")


class _Link:
    """What the threads beside a :class:`ScoringProcess` share with it: the helper's answers (None
    once it is gone), the time of its latest sign of progress, its last lines on stderr, and
    whether the helper is being closed."""

    def __init__(self):
        self.answers: queue.Queue = queue.Queue()
        self.progress = time.monotonic()
        self.last_words: Deque[str] = collections.deque(maxlen=LAST_WORDS)
        self.closing = threading.Event()


def _send_all(requests: Connection, outbox: queue.Queue, link: _Link) -> None:
    """The sender thread: the queued requests, in order, until the helper is closed or gone; then
    the closed request pipe ends the helper's loop. Only this thread touches the request pipe."""
    try:
        while not link.closing.is_set():
            payload = outbox.get()
            if payload is None or link.closing.is_set():
                break
            requests.send_bytes(payload)
    except OSError:
        pass  # the helper is gone: the reader thread says so
    finally:
        requests.close()


def _read_all(responses: Connection, link: _Link) -> None:
    """The reader thread: the helper's answers into ``link.answers``, its signs of progress into
    ``link.progress``, and None when it is gone. Only this thread touches the response pipe."""
    try:
        while True:
            message = responses.recv()
            if message[0] == PROGRESS:
                link.progress = time.monotonic()
            else:
                link.answers.put(message)
    except (EOFError, OSError):
        pass
    finally:
        responses.close()
        link.answers.put(None)


def _relay(stderr: IO[bytes], link: _Link) -> None:
    """The helper's stderr, line by line, onto this process's, the last lines kept in ``link``."""
    with stderr:
        for raw in iter(stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            link.last_words.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "an unknown signal"


def _process_state(pid: int) -> Optional[str]:
    """The process's state letter from /proc (``T``: stopped), None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


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
                self.stats = add_stats(self.scorer, self.stats, items, self.per_prompt)
            except Exception as err:
                self.error = err
            self.seconds += time.perf_counter() - start

    def total(self) -> Total:
        if self.error is not None:
            raise self.error
        return Total(self.stats, self.seconds, self.per_prompt)


Scoring = Union[ScoringProcess, InlineScoring]


def running(scoring: Optional[Scoring], scorer: Scorer, prompts: Sequence[GoldPrompt]) -> Scoring:
    """``scoring`` while its helper runs, else a new one (:func:`start_scoring`); a helper that ended
    by itself since (killed while idle) is said with one warning, with how it ended."""
    if scoring is not None and scoring.alive:
        return scoring
    ended = scoring.ended() if isinstance(scoring, ScoringProcess) else None
    if ended:
        logger.warning("%s; a new one is started", ended)
    return start_scoring(scorer, prompts)


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


def _remote(error: BaseException, text: str) -> BaseException:
    error.__cause__ = RemoteTraceback(text)
    return error


def _stop(process: subprocess.Popen, outbox: queue.Queue, link: _Link) -> None:
    """End the helper: the sender thread drops what is queued and closes the request pipe, which
    ends the helper's loop; kill it if it is still there a second later (busy, or stopped)."""
    link.closing.set()
    outbox.put(None)
    try:
        process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
