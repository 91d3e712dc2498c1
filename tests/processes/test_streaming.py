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
from nbest_eval.data import InputError
from nbest_eval.formats import FileParts, LineSource, Ungrouped, iter_nbest, read_nbest, write_gold, write_nbest
from nbest_eval.formats.shard import byte_range

METRICS = "map,wf1,pref_spearman,bleu_1x1,bleu_100x100"


@pytest.fixture(autouse=True)
def small_shards(monkeypatch):
    """Workers for these small golds too, which score would otherwise leave to one process."""
    monkeypatch.setattr("nbest_eval.processes.workers.MIN_PROMPTS_PER_WORKER", 1)


@pytest.fixture
def nbest_in_four_formats(tmp_path):
    """(gold, nbest, folder): a random 60-prompt gold as gold.txt and its lists as nbest.tsv, .jsonl,
    .staple and .moses."""
    gold, nbest = random_case(21, n_prompts=60)
    write_gold(gold, tmp_path / "gold.txt")
    for fmt in ("tsv", "jsonl", "staple", "moses"):
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


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "staple", "moses"])
def test_any_number_of_jobs_gives_the_in_memory_values_exactly(nbest_in_four_formats, fmt):
    gold, _, tmp = nbest_in_four_formats
    expected = Scorer(METRICS).score(gold, read_nbest(tmp / f"nbest.{fmt}", gold)).values  # staple: no scores
    outputs = {jobs: score(tmp, tmp / f"nbest.{fmt}", "--jobs", str(jobs)) for jobs in (1, 2, 3)}
    for jobs, result in outputs.items():
        assert result.returncode == 0, result.stderr
        values = json.loads(result.stdout)
        assert {k: values[k] for k in expected} == expected, jobs  # ==, not approx: same sums, same order


def test_an_ungrouped_file_is_read_whole_and_scored_the_same(nbest_in_four_formats):
    gold, nbest, tmp = nbest_in_four_formats
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


def test_a_list_is_ready_before_the_input_ends(nbest_in_four_formats):
    """Streaming: the first prompt's list comes out while the writer has not finished the file."""
    gold, nbest, tmp = nbest_in_four_formats
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


def test_an_error_in_a_worker_ends_the_command_cleanly(nbest_in_four_formats):
    gold, nbest, tmp = nbest_in_four_formats
    result = score(tmp, tmp / "nbest.staple", "--jobs", "2", "--wf1-threshold", "0.5")  # staple: no scores
    assert result.returncode == 2 and "the F1 threshold needs a model score" in result.stderr
    assert "Traceback" not in result.stderr


def test_values_do_not_depend_on_the_hash_seed(nbest_in_four_formats):
    """Sums run in gold order, not in set order, so that processes (and workers) agree to the last bit."""
    _, _, tmp = nbest_in_four_formats
    outputs = set()
    for seed in ("1", "2"):
        argv = ["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), "--metrics", "wf1,wrecall",
                "--json", "--jobs", "1"]
        result = subprocess.run([sys.executable, "-m", "nbest_eval", *argv], capture_output=True, text=True,
                                env={**os.environ, "PYTHONHASHSEED": seed})
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_a_stream_is_shared_out_to_the_workers(nbest_in_four_formats):
    """A pipe cannot be read by every worker: its lists are sent to them instead, same values."""
    _, _, tmp = nbest_in_four_formats
    from_file = score(tmp, tmp / "nbest.tsv", "--jobs", "2")
    from_pipe = score(tmp, "-", "--jobs", "2", stdin=(tmp / "nbest.tsv").read_text())
    assert from_pipe.returncode == 0, from_pipe.stderr
    assert json.loads(from_pipe.stdout) == json.loads(from_file.stdout)


def _part_of_line(path, fmt, parts, number):
    """Which of ``parts`` byte ranges of ``path`` holds its 1-based line ``number``."""
    with open(path, "rb") as file:
        ranges = [byte_range(file, fmt, k, parts, 1 << 20) for k in range(parts)]
    return max(k for k, part in enumerate(ranges) if part.first_line <= number)


def _file_parts(path, gold, fmt):
    with open(path, "rb") as file:
        return FileParts(LineSource(file, str(path)), gold, fmt)


@pytest.mark.parametrize("fmt", ["tsv", "moses"])
def test_a_bad_line_is_its_own_parts_to_report(nbest_in_four_formats, fmt):
    """A bad line in the second worker's part: the first worker's part reads without it, the second
    reports it with its line number in the file, and `score --jobs 2` reports what one process does."""
    gold, nbest, tmp = nbest_in_four_formats
    separator = "\t" if fmt == "tsv" else " ||| "
    lines = (tmp / f"nbest.{fmt}").read_text().splitlines()
    bad = len(lines) - 2  # 0-based, near the end: in the second part
    fields = lines[bad].split(separator)
    fields[2 if fmt == "tsv" else 3] = "not-a-score"
    lines[bad] = separator.join(fields)
    path = tmp / f"bad.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    assert _part_of_line(path, fmt, 2, bad + 1) == 1
    parts = _file_parts(path, gold, fmt)
    assert dict(parts.read(0, 2))  # lists, no error: the bad line is not parsed there
    with pytest.raises(InputError, match="not-a-score") as raised:
        list(parts.read(1, 2))
    assert raised.value.line == bad + 1
    one, two = (score(tmp, path, "--jobs", jobs) for jobs in ("1", "2"))
    assert two.returncode == 2 and f"bad.{fmt}:{bad + 1}:" in two.stderr, two.stderr
    assert two.stderr.splitlines()[-1] == one.stderr.splitlines()[-1]


def test_a_prompt_that_comes_back_within_a_part_is_never_one_list(nbest_in_four_formats):
    """a, b, a in the first worker's part: that part raises Ungrouped rather than read a's two runs as
    one list, and `score --jobs 2` gives the values of one process reading the file whole."""
    gold, _, tmp = nbest_in_four_formats
    a, b, c, d = (p.id for p in gold.prompts[:4])
    keys = [(a, 1), (b, 1), (a, 2), *((c, r) for r in range(1, 9)), *((d, r) for r in range(1, 9))]
    (tmp / "back.tsv").write_text("".join(f"{pid}\t{rank}\t-1\thyp {rank}\n" for pid, rank in keys))
    assert _part_of_line(tmp / "back.tsv", "tsv", 2, 3) == 0  # the second run of a, in the first part
    with pytest.raises(Ungrouped) as raised:
        list(_file_parts(tmp / "back.tsv", gold, "tsv").read(0, 2))
    assert raised.value.prompt_id == a and raised.value.line == 3
    two = score(tmp, tmp / "back.tsv", "--jobs", "2")
    assert two.returncode == 0, two.stderr
    assert json.loads(two.stdout) == json.loads(score(tmp, tmp / "back.tsv", "--jobs", "1").stdout)


def test_a_file_with_no_list_for_a_shard_is_scored(nbest_in_four_formats):
    """Lists for the second worker's prompts only: the first worker reads nothing of its own, which
    is not an empty file."""
    gold, nbest, tmp = nbest_in_four_formats
    theirs = {p.id: nbest[p.id] for p in gold.prompts[1::2] if p.id in nbest}
    write_nbest(theirs, tmp / "half.tsv", "tsv")
    assert json.loads(score(tmp, tmp / "half.tsv", "--jobs", "2").stdout) == \
        json.loads(score(tmp, tmp / "half.tsv", "--jobs", "1").stdout)
    (tmp / "empty.tsv").write_text("prompt_id\trank\tscore\thypothesis\n")  # a header, no list
    assert "no n-best list found" in score(tmp, tmp / "empty.tsv", "--jobs", "2", "--format", "tsv").stderr
