"""The scoring helper process of :mod:`nbest_eval.processes.pipeline`: its loop, and what it sends back.

It runs as a fresh ``python -c`` that imports only the metric core. It reads its set-up (``sys.path``,
then the scorer's recipe and the gold prompts), builds every prompt's reference statistics, then
scores requests in the order they come. Answers are ``(token, ok, payload)``: a tally's total, an
error (with its traceback's text), or a sign of progress (token :data:`PROGRESS`), which the caller's
stall timer (``pipeline.STALL_SECONDS``) waits for.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, List, Sequence, Tuple

from ..data import GoldPrompt, Hyp
from ..scorer import Scorer
from ..stats import Stats

#: what a tally adds: (prompt, its n-best list) pairs
Items = Sequence[Tuple[GoldPrompt, Sequence[Hyp]]]
SETUP = 0  # the token of the helper's answer when its set-up fails
PROGRESS = -1  # the token of the helper's sign of progress
HEARTBEAT_SECONDS = 1.0  # the helper's signs of progress, at most one this often


def add_stats(scorer: Scorer, total: Stats, items: Items, per_prompt: List[Tuple[str, Stats]]) -> Stats:
    """``total`` plus each list's statistics, one at a time: the additions of a sequential loop;
    each list's statistics appended to ``per_prompt``."""
    for prompt, hyps in items:
        stats = scorer.prompt_stats(prompt, hyps)
        per_prompt.append((prompt.id, stats))
        total = total + stats
    return total


def serve(request_fd: int, response_fd: int) -> None:
    """The helper's loop: set-up (sys.path, then the scorer's recipe and the prompts), warm-up, requests."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer; the closed pipe ends us
    os.nice(10)  # with no idle core, generation goes first: scoring then waits, it does not slow generation
    requests = Connection(request_fd, writable=False)
    responses = Connection(response_fd, readable=False)
    beat = _heartbeat(responses)
    try:
        sys.path[:] = pickle.loads(requests.recv_bytes())
        (keys, options), stat_names, prompts = pickle.loads(requests.recv_bytes())
        scorer = Scorer(keys, **options)
        if scorer.stat_names != stat_names:
            raise RuntimeError("the scoring process built a scorer with other statistics than the caller's")
        _warm_up(scorer, prompts, beat)
    except EOFError:
        return
    except Exception as err:
        _answer_error(responses, SETUP, err)
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
        for i, hyps in rest[0]:  # one prompt at a time, with a sign of progress between them
            _score(scorer, tallies[token], [(prompts[i], [Hyp(*h) for h in hyps])])
            beat()


def _score(scorer: Scorer, tally: List[Any], items: Items) -> None:
    if tally[2] is not None:
        return  # the tally already failed
    start = time.perf_counter()
    try:
        tally[0] = add_stats(scorer, tally[0], items, tally[3])
    except Exception as err:
        tally[2] = err
    tally[1] += time.perf_counter() - start


def _heartbeat(responses: Connection) -> Callable[[], None]:
    """A sign of progress for the caller's stall timer (``pipeline.STALL_SECONDS``), sent at most
    once every :data:`HEARTBEAT_SECONDS`."""
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        if now - last[0] >= HEARTBEAT_SECONDS:
            responses.send((PROGRESS, True, None))
            last[0] = now
    return beat


def _warm_up(scorer: Scorer, prompts: List[GoldPrompt], beat: Callable[[], None]) -> None:
    """Build every prompt's reference statistics now, not at the first validation: score a list
    of its three most frequent translations (three, so that the preference correlations are
    computed, importing scipy here too) and drop the result."""
    for prompt in prompts:
        scorer.prompt_stats(prompt, [Hyp(text, -float(rank)) for rank, (text, _) in enumerate(prompt.translations[:3])])
        beat()


def _answer_error(responses: Connection, token: int, error: Exception) -> None:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        responses.send((token, False, (error, text)))
    except Exception:  # an exception that does not pickle: its text is enough
        responses.send((token, False, (RuntimeError(f"{type(error).__name__}: {error}"), text)))
