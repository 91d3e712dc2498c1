"""score reads n-best files as streams (one prompt's list at a time) and shards the scoring over
worker processes: the values are those of scoring the whole file in one process, exactly."""

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import threading
from types import SimpleNamespace
from unittest import mock

import pytest
from cases import random_case

from nbest_eval import Scorer
from nbest_eval.cli import main
from nbest_eval.formats import LineSource, iter_nbest, read_nbest, write_gold, write_nbest

METRICS = "map,wf1,pref_spearman,bleu_1x1,bleu_100x100"


@pytest.fixture
def files(tmp_path):
    gold, nbest = random_case(21, n_prompts=60)
    write_gold(gold, tmp_path / "gold.txt")
    for fmt in ("tsv", "jsonl", "staple"):
        write_nbest(nbest, tmp_path / f"nbest.{fmt}", fmt, gold=gold)
    return gold, nbest, tmp_path


def score(tmp_path, nbest_file, *options, stdin=None):
    """``nbest-eval score --json`` in this process (workers are forked from it)."""
    argv = ["score", "--gold", str(tmp_path / "gold.txt"), "--nbest", str(nbest_file), "--metrics", METRICS,
            "--json", *options]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if stdin is None:
            code = main(argv)
        else:
            with mock.patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()))):
                code = main(argv)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "staple"])
def test_any_number_of_jobs_gives_the_in_memory_values_exactly(files, fmt):
    gold, _, tmp = files
    expected = Scorer(METRICS).score(gold, read_nbest(tmp / f"nbest.{fmt}", gold)).values  # staple: no scores
    outputs = {jobs: score(tmp, tmp / f"nbest.{fmt}", "--jobs", str(jobs)) for jobs in (1, 2, 3)}
    for jobs, result in outputs.items():
        assert result.returncode == 0, result.stderr
        values = json.loads(result.stdout)
        assert {k: values[k] for k in expected} == expected, jobs  # ==, not approx: same sums, same order


def test_an_ungrouped_file_is_read_whole_and_scored_the_same(files):
    gold, nbest, tmp = files
    lines = (tmp / "nbest.tsv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    random.Random(0).shuffle(rows)
    (tmp / "shuffled.tsv").write_text("\n".join([header] + rows) + "\n")
    grouped = json.loads(score(tmp, tmp / "nbest.tsv", "--jobs", "2").stdout)
    shuffled = score(tmp, tmp / "shuffled.tsv", "--jobs", "2")
    assert shuffled.returncode == 0, shuffled.stderr
    assert json.loads(shuffled.stdout) == grouped
    piped = score(tmp, "-", stdin=(tmp / "shuffled.tsv").read_text())
    assert piped.returncode == 2 and "not grouped by prompt" in piped.stderr and "Traceback" not in piped.stderr


def test_a_list_is_ready_before_the_input_ends(files):
    """Streaming: the first prompt's list comes out while the writer has not finished the file."""
    gold, nbest, tmp = files
    text = (tmp / "nbest.jsonl").read_text().splitlines(keepends=True)
    read_end, write_end = os.pipe()
    writer = os.fdopen(write_end, "w")
    writer.write("".join(text[:2]))
    writer.flush()
    with os.fdopen(read_end, "rb") as stream:
        groups = iter_nbest(LineSource(stream, "<pipe>"), gold, "jsonl")
        first = next(groups)  # line 2 is in the pipe, so line 1's list is complete; the pipe stays open
        assert first[0] == json.loads(text[0])["id"]
        feeder = threading.Thread(target=lambda: (writer.write("".join(text[2:])), writer.close()))
        feeder.start()
        rest = list(groups)
        feeder.join()
    assert len(rest) == len(text) - 1


def test_an_error_in_a_worker_ends_the_command_cleanly(files):
    gold, nbest, tmp = files
    result = score(tmp, tmp / "nbest.staple", "--jobs", "2", "--wf1-threshold", "0.5")  # staple: no scores
    assert result.returncode == 2 and "the F1 threshold needs a model score" in result.stderr
    assert "Traceback" not in result.stderr


def test_values_do_not_depend_on_the_hash_seed(files):
    """Sums run in gold order, not in set order, so that processes (and workers) agree to the last bit."""
    _, _, tmp = files
    outputs = set()
    for seed in ("1", "2"):
        argv = ["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), "--metrics", "wf1,wrecall",
                "--json", "--jobs", "1"]
        result = subprocess.run([sys.executable, "-m", "nbest_eval", *argv], capture_output=True, text=True,
                                env={**os.environ, "PYTHONHASHSEED": seed})
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_a_stream_is_shared_out_to_the_workers(files):
    """A pipe cannot be read by every worker: its lists are sent to them instead, same values."""
    _, _, tmp = files
    from_file = score(tmp, tmp / "nbest.tsv", "--jobs", "2")
    from_pipe = score(tmp, "-", "--jobs", "2", stdin=(tmp / "nbest.tsv").read_text())
    assert from_pipe.returncode == 0, from_pipe.stderr
    assert json.loads(from_pipe.stdout) == json.loads(from_file.stdout)
