"""Standard input and output, pipes, FIFOs and special files: an input that can be read only once
(standard input, /dev/stdin, a pipe, a FIFO) scores as a file does; output goes to standard output
with the summary moved aside; a closed pipe ends quietly, a full standard output is an error, an
endless line (/dev/zero) is refused at the line limit, and one stream is never read as two inputs."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cases import (
    FAIRSEQ_OUTPUT,
    THREE_PROMPT_GOLD,
    TWO_PROMPT_GOLD,
    line_source,
    run_nbest_eval,
    score_values,
    strict_json,
)

from nbest_eval.cli import main
from nbest_eval.formats import read_nbest

# p1: AP 1/2, p2: AP 1; p3 has no valid translation (not counted). trec_eval's counts, over p1 and p2:
# 2 + 2 hypotheses returned, 2 + 2 valid translations, 1 + 2 of them returned
EXPECTED = {"map": 0.75, "n_prompts": 3, "num_q": 2, "num_ret": 4, "num_rel": 4, "num_rel_ret": 3}


@pytest.fixture
def fairseq_output_dir(gold_file):
    """The folder of gold_file, with gen.out: FAIRSEQ_OUTPUT, fairseq-generate's output for that gold."""
    (gold_file.parent / "gen.out").write_text(FAIRSEQ_OUTPUT, encoding="utf-8")
    return gold_file.parent



def feed_pipe(data: bytes):
    """A pipe with a writer thread: ``/dev/fd/N`` as bash's ``<(...)`` gives it."""
    read_end, write_end = os.pipe()

    def write():
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
    threading.Thread(target=write, daemon=True).start()
    return f"/dev/fd/{read_end}", {"pass_fds": (read_end,)}, lambda: os.close(read_end)


def feed_fifo(tmp: Path, data: bytes):
    fifo = tmp / "nbest.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as pipe:  # blocks until the reader opens it
            pipe.write(data)
    threading.Thread(target=write, daemon=True).start()
    return str(fifo), {}, lambda: None


STREAMS = {  # how the n-best file reaches the command -> (--gold, --nbest, subprocess options, clean-up)
    "file": lambda tmp, data: (tmp / "gold.txt", tmp / "gen.out", {}, lambda: None),
    "stdin as -": lambda tmp, data: (tmp / "gold.txt", "-", {"input": data}, lambda: None),
    "/dev/stdin": lambda tmp, data: (tmp / "gold.txt", "/dev/stdin", {"input": data}, lambda: None),
    "pipe": lambda tmp, data: (tmp / "gold.txt", *feed_pipe(data)),
    "fifo": lambda tmp, data: (tmp / "gold.txt", *feed_fifo(tmp, data)),
    "gold from stdin": lambda tmp, data: ("-", tmp / "gen.out", {"input": THREE_PROMPT_GOLD.encode()}, lambda: None),
}


@pytest.mark.parametrize("how", list(STREAMS))
def test_inputs_read_once_score_like_a_file(fairseq_output_dir, how):
    gold, nbest, options, close = STREAMS[how](fairseq_output_dir, FAIRSEQ_OUTPUT.encode())
    try:
        result = run_nbest_eval("score", "--gold", gold, "--nbest", nbest, "--metrics", "map", "--json", **options)
    finally:
        close()
    assert result.returncode == 0, result.stderr.decode()
    assert score_values(result.stdout) == EXPECTED
    name = "<stdin>" if nbest == "-" else nbest
    assert f"nbest-eval score: reading {name} as fairseq (detected)" in result.stderr.decode()


def test_convert_reads_stdin_and_writes_stdout(fairseq_output_dir, gold):
    result = run_nbest_eval("convert", "--gold", fairseq_output_dir / "gold.txt", "--nbest", "-", "--to", "tsv", "-",
                        input=FAIRSEQ_OUTPUT.encode())
    assert result.returncode == 0, result.stderr.decode()
    assert read_nbest(line_source(result.stdout), gold, "tsv") == read_nbest(fairseq_output_dir / "gen.out", gold)
    assert "-> standard output" in result.stderr.decode()


def test_per_prompt_to_stdout_moves_the_summary_to_stderr(fairseq_output_dir):
    result = run_nbest_eval("score", "--gold", fairseq_output_dir / "gold.txt", "--nbest",
                            fairseq_output_dir / "gen.out", "--metrics", "map", "--json", "--per-prompt", "-")
    rows = [strict_json(line) for line in result.stdout.decode().splitlines()]
    assert [row["id"] for row in rows] == ["p1", "p2", "p3"] and [row["map"] for row in rows] == [0.5, 1.0, None]
    assert '"map": 0.75' in result.stderr.decode()


def test_a_closed_output_pipe_ends_quietly(fairseq_output_dir):
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as closed:
        result = run_nbest_eval("convert", "--gold", fairseq_output_dir / "gold.txt", "--nbest",
                            fairseq_output_dir / "gen.out", "--to", "tsv", "-", stdout=closed, stderr=subprocess.PIPE)
    assert result.returncode == 1 and b"error" not in result.stderr


def test_a_fifo_gold_is_read_once(command_dir):
    path = command_dir / "gold.fifo"
    os.mkfifo(path)
    threading.Thread(target=lambda: path.write_text(TWO_PROMPT_GOLD), daemon=True).start()
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "score", "--gold", str(path), "--nbest",
                             str(command_dir / "a.tsv"), "--metrics", "map", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and '"map": 0.75' in result.stdout, result.stderr



@pytest.mark.parametrize("option", ["--gold", "--nbest"])
def test_endless_line_is_an_error_not_a_memory_blow_up(fairseq_output_dir, option):
    paths = {"--gold": fairseq_output_dir / "gold.txt", "--nbest": fairseq_output_dir / "gen.out", option: "/dev/zero"}
    result = run_nbest_eval("score", *[x for pair in paths.items() for x in pair], "--max-line-bytes", "4096")
    assert result.returncode == 2
    assert "/dev/zero:1: line longer than 4096 bytes; raise the limit with --max-line-bytes" in result.stderr.decode()



@pytest.mark.parametrize("command", [["score", "--metrics", "map"], ["score", "--json"],
                                     ["convert", "--to", "tsv", "-"]])
def test_a_full_standard_output_is_an_error(command_dir, command):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nbest_eval", command[0], "--gold",
                                 str(command_dir / "gold.txt"), "--nbest", str(command_dir / "a.tsv"), *command[1:]],
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith("error: standard output: cannot write: No space left on device"), \
        result.stderr


def test_gold_and_stdin_stream_are_one_input(command_dir, monkeypatch, capsys):
    """``--gold -`` and ``--nbest /dev/stdin`` read one stream, whatever standard input is."""
    with open(command_dir / "gold.txt", "rb") as stdin:
        monkeypatch.setattr(os, "fstat", lambda fd, real=os.fstat: real(stdin.fileno()) if fd == 0 else real(fd))
        assert main(["score", "--gold", "-", "--nbest", str(command_dir / "gold.txt")]) == 2
    assert "--gold and --nbest both read" in capsys.readouterr().err
