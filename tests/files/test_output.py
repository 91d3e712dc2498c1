"""All-or-nothing output (nbest_eval.files.output): a command's outputs appear together or not at all.
A write cut short by a file size limit, a later output that fails, or a command stopped (SIGTERM,
Ctrl-C) while it writes leaves no output, no partial file, and any file it replaced as it was."""

import os
import resource
import signal
import subprocess
import sys

import pytest
from cases import run_nbest_eval

from nbest_eval import InputError
from nbest_eval.data import Gold, GoldPrompt
from nbest_eval.files.output import all_or_nothing, write_text
from nbest_eval.formats import write_gold


def file_size_limit(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_write_cut_short_leaves_nothing(tmp_path):
    gold = tmp_path / "gold.txt"
    gold.write_text("".join(f"p{i}|prompt {i}\n" + "".join(f"translation {i} {j}|1\n" for j in range(200)) + "\n"
                            for i in range(5)))
    (tmp_path / "one.tsv").write_text("".join(f"p{i}\t1\t\ttranslation {i} 0\n" for i in range(5)))
    (tmp_path / "all.tsv").write_text("".join(f"p{i}\t{j + 1}\t\ttranslation {i} {j}\n"
                                              for i in range(5) for j in range(200)))
    for args in (["--nbest", tmp_path / "one.tsv", "--to", "trec", tmp_path / "r"],  # the run fits, the qrels not
                 ["--nbest", tmp_path / "all.tsv", "--to", "staple", tmp_path / "out.txt"]):
        before = sorted(tmp_path.iterdir())
        result = run_nbest_eval("convert", "--gold", gold, *args, preexec_fn=file_size_limit(4096))
        assert result.returncode == 2 and b"File too large" in result.stderr, result.stderr
        assert sorted(tmp_path.iterdir()) == before  # no output, no partial file
        assert run_nbest_eval("convert", "--gold", gold, *args).returncode == 0  # and nothing in a re-run's way
    assert (tmp_path / "r.run").stat().st_size < 4096 < (tmp_path / "r.qrels").stat().st_size


def test_an_overwritten_output_comes_back_when_a_later_one_fails(command_dir):
    (command_dir / "out").mkdir()
    write_text(command_dir / "first.txt", "old")
    with pytest.raises(InputError, match="out: cannot write"):
        with all_or_nothing():
            write_text(command_dir / "first.txt", "new", overwrite=True)
            write_text(command_dir / "out", "a directory cannot be replaced by a file", overwrite=True)
    assert (command_dir / "first.txt").read_text() == "old"
    assert sorted(p.name for p in command_dir.iterdir()) == ["a.tsv", "b.tsv", "first.txt", "gold-copy.txt",
                                                             "gold-link.txt", "gold.txt", "out"]


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
