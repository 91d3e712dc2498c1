"""Hostile input, second pass (issue 17): `score --jobs N` ends every worker when it is stopped
(SIGTERM, Ctrl-C to the process group, or killed outright), and starts no more workers than the
gold has work for. The reader waits on a pipe that never ends, so the workers are all waiting.
A command stopped while it writes its outputs leaves none of them, and no partial file."""

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


# A command whose N-th output is slow to write: it says so on stderr once that output's partial
# file is written (and the earlier ones are staged), then waits to be stopped.
SLOW_WRITE = """
import signal, sys, time
import nbest_eval.files.output as output
from nbest_eval.cli import main

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, even if inherited ignored
real, rendered = output._stage, []

def slow_stage(path, render, overwrite):
    def slow(partial):
        render(partial)
        rendered.append(path)
        if len(rendered) == int(sys.argv[1]):
            sys.__stderr__.write("writing\\n")
            sys.__stderr__.flush()
            time.sleep(60)
    return real(path, slow, overwrite)

output._stage = slow_stage
sys.exit(main(sys.argv[2:]))
"""
WRITES = {  # command -> (its arguments, {t}: the folder; the output that is slow, counted from 1)
    "convert, one output": (["convert", "--gold", "{t}/g.txt", "--nbest", "{t}/a.tsv", "--to", "jsonl",
                             "{t}/out.jsonl"], 1),
    "select, the second of two outputs": (["select", "--from-nbest", "{t}/a.tsv", "{t}/b.tsv", "--gold", "{t}/g.txt",
                                           "--no-cache", "--save", "{t}/table.json", "--link-best", "{t}/best.tsv"],
                                          2),
}
SIGNALS = {"SIGTERM": (signal.SIGTERM, 128 + signal.SIGTERM), "Ctrl-C": (signal.SIGINT, 130)}


@pytest.mark.parametrize("stop, status", SIGNALS.values(), ids=SIGNALS.keys())
@pytest.mark.parametrize("argv, slow", WRITES.values(), ids=WRITES.keys())
def test_stopped_while_writing_leaves_no_output(tmp_path, argv, slow, stop, status):
    write_gold(Gold([GoldPrompt(f"p{i}", f"prompt {i}", (("x", 1.0),)) for i in range(2)]), tmp_path / "g.txt")
    (tmp_path / "a.tsv").write_text("p0\t1\t-1\tx\np1\t1\t-1\ty\n")
    (tmp_path / "b.tsv").write_text("p0\t1\t-1\ty\np1\t1\t-1\tx\n")
    inputs = sorted(os.listdir(tmp_path))
    command = subprocess.Popen([sys.executable, "-c", SLOW_WRITE, str(slow), *(a.format(t=tmp_path) for a in argv)],
                               stderr=subprocess.PIPE, text=True)
    try:
        assert "writing\n" in iter(command.stderr.readline, "")  # (after what the command reports)
        assert any(name.endswith(".partial") for name in os.listdir(tmp_path))  # caught in the middle
        os.kill(command.pid, stop)
        assert command.wait(10) == status
        assert "Traceback" not in command.stderr.read()
        assert sorted(os.listdir(tmp_path)) == inputs  # no output, no partial file
    finally:
        if command.poll() is None:
            command.kill()
        command.wait()
        command.stderr.close()


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
