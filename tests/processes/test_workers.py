"""`score --jobs N`'s worker processes (nbest_eval.processes.workers): no more of them than the gold has
work for; each ends when the command is stopped (SIGTERM, Ctrl-C to the process group, or killed
outright), tested while the reader waits on a pipe that never ends, so the workers are all waiting;
and each starts with those signals blocked until its own handlers are set. (A command stopped while
it writes its outputs: files/test_output.py.)"""

import os
import signal
import subprocess
import sys
import time
from unittest import mock

import pytest

from nbest_eval import Scorer
from nbest_eval.data import Gold, GoldPrompt
from nbest_eval.formats import write_gold
from nbest_eval.processes.workers import MIN_PROMPTS_PER_WORKER, POLL_SECONDS, score_stream

PROMPTS = 3 * MIN_PROMPTS_PER_WORKER


def children(pid):
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if entry.isdigit() and int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


STOPS = {  # how the command is stopped -> (signal, to the whole group?, its exit status, how soon workers end)
    "SIGTERM": (signal.SIGTERM, False, 128 + signal.SIGTERM, 2.0),
    "Ctrl-C": (signal.SIGINT, True, 130, 2.0),
    "SIGKILL": (signal.SIGKILL, False, -signal.SIGKILL, 2.0 + 2 * POLL_SECONDS),
}


def _ctrl_c_as_in_a_terminal():
    """The command gets Ctrl-C as a terminal's foreground job does, whatever this test process
    inherited or was left with by in-process frameworks (a background job inherits SIGINT ignored,
    and Python then keeps ignoring it; a blocked one stays pending)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.mark.parametrize("stop, group, status, within", STOPS.values(), ids=STOPS.keys())
def test_stopping_score_ends_every_worker(tmp_path, stop, group, status, within):
    write_gold(Gold([GoldPrompt(f"p{i}", f"prompt {i}", (("x", 1.0),)) for i in range(PROMPTS)]), tmp_path / "g.txt")
    command = subprocess.Popen([sys.executable, "-m", "nbest_eval", "score", "--gold", str(tmp_path / "g.txt"),
                                "--nbest", "-", "--format", "tsv", "--jobs", "8"], stdin=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)
    try:
        command.stdin.write(b"p0\t1\t\tx\n")
        command.stdin.flush()
        assert wait_until(lambda: len(children(command.pid)) == 3, 30)  # 3 workers for 300 prompts, not 8
        workers = children(command.pid)
        (os.killpg if group else os.kill)(command.pid, stop)
        assert command.wait(10) == status
        assert wait_until(lambda: not any(alive(w) for w in workers), within), [w for w in workers if alive(w)]
        assert b"Traceback" not in command.stderr.read()
    finally:
        for pid in [command.pid] + children(command.pid):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        command.stdin.close()
        command.wait()


@pytest.mark.parametrize("prompts, jobs, started", [(5, 64, 0), (2 * MIN_PROMPTS_PER_WORKER, 64, 2),
                                                    (10 * MIN_PROMPTS_PER_WORKER, 3, 3)])
def test_no_more_workers_than_work(prompts, jobs, started):
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}", (("x", 1.0),)) for i in range(prompts)])
    with mock.patch("nbest_eval.processes.workers._in_workers", return_value={}) as pool:
        score_stream(Scorer(["map"]), gold, iter([]), jobs=jobs)
    assert (pool.call_args.args[3] if pool.called else 0) == started


def test_workers_start_with_ctrl_c_and_sigterm_blocked():
    """A worker terminated (or Ctrl-C'd) before it has set its own handlers must not run the reader's
    handlers and then the reader's own code in the fork: both signals wait, blocked, until it has."""
    import multiprocessing

    from nbest_eval.processes.workers import _start

    context = multiprocessing.get_context("fork")
    masks = context.SimpleQueue()
    worker = context.Process(target=lambda: masks.put(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    _start([worker])
    worker.join(timeout=10)
    assert {signal.SIGINT, signal.SIGTERM} <= masks.get()
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the reader's mask is back
