"""Hostile input, second pass (issue 17): `score --jobs N` ends every worker when it is stopped
(SIGTERM, Ctrl-C to the process group, or killed outright), and starts no more workers than the
gold has work for. The reader waits on a pipe that never ends, so the workers are all waiting."""

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
from nbest_eval.workers import MIN_PROMPTS_PER_WORKER, POLL_SECONDS, score_stream

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


@pytest.mark.parametrize("stop, group, status, within", STOPS.values(), ids=STOPS.keys())
def test_stopping_score_ends_every_worker(tmp_path, stop, group, status, within):
    write_gold(Gold([GoldPrompt(f"p{i}", f"prompt {i}", (("x", 1.0),)) for i in range(PROMPTS)]), tmp_path / "g.txt")
    command = subprocess.Popen([sys.executable, "-m", "nbest_eval", "score", "--gold", str(tmp_path / "g.txt"),
                                "--nbest", "-", "--format", "tsv", "--jobs", "8"], stdin=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
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
    with mock.patch("nbest_eval.workers._in_workers", return_value={}) as pool:
        score_stream(Scorer(["map"]), gold, iter([]), jobs=jobs)
    assert (pool.call_args.args[3] if pool.called else 0) == started
