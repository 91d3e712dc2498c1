"""`score --jobs N` from a file: worker k reads and parses only part k (a byte range cut at prompt
boundaries in tsv, moses and jsonl; nbest_eval.formats.shard), and the values, errors and the
ungrouped fallback are those of one process reading the whole file."""

import contextlib
import io
import json
import signal
from types import SimpleNamespace

import pytest
from cases import random_case

from nbest_eval import Scorer
from nbest_eval.cli import main
from nbest_eval.formats import FileParts, LineSource, Ungrouped, read_nbest, write_gold, write_nbest
from nbest_eval.formats.shard import KEY_OF_LINE, byte_range, open_part
from nbest_eval.processes.workers import score_stream

METRICS = "map,wf1,bleu_1x1,bleu_100x100"
RANGED = ("tsv", "moses", "jsonl")
JOBS = (2, 3, 7)


@pytest.fixture(autouse=True)
def parts_for_small_golds(monkeypatch):
    """Workers for these small golds too, which score would otherwise leave to one process."""
    monkeypatch.setattr("nbest_eval.processes.workers.MIN_PROMPTS_PER_WORKER", 1)


@pytest.fixture
def parts_case(tmp_path):
    """(gold, nbest, folder): a random 40-prompt gold as gold.txt, its lists as nbest.<format>."""
    gold, nbest = random_case(7, n_prompts=40, max_hyps=9)
    write_gold(gold, tmp_path / "gold.txt")
    for fmt in ("tsv", "jsonl", "staple", "moses"):
        write_nbest(nbest, tmp_path / f"nbest.{fmt}", fmt, gold=gold)
    return gold, nbest, tmp_path


def score(folder, path, *options):
    """``nbest-eval score --json`` in this process (workers are forked from it)."""
    argv = ["score", "--gold", str(folder / "gold.txt"), "--nbest", str(path), "--metrics", METRICS, "--json",
            *options]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def ranges(path, fmt, jobs):
    with open(path, "rb") as file:
        return [byte_range(file, fmt, k, jobs, 1 << 20) for k in range(jobs)]


def keyed_lines(data, fmt):
    """(start byte, key) of every line of ``data`` whose key is not None, by hand."""
    found, at = [], 0
    for raw in data.splitlines(keepends=True):
        key = KEY_OF_LINE[fmt](raw.rstrip(b"\r\n").decode())
        if key is not None:
            found.append((at, key))
        at += len(raw)
    return found


@pytest.mark.parametrize("fmt", RANGED)
@pytest.mark.parametrize("jobs", JOBS)
def test_the_ranges_tile_the_file_and_cut_only_where_the_prompt_changes(parts_case, fmt, jobs):
    _, _, tmp = parts_case
    path = tmp / f"nbest.{fmt}"
    data = path.read_bytes()
    found = ranges(path, fmt, jobs)
    assert found[0].start == 0 and found[-1].end == len(data)
    assert all(a.end == b.start for a, b in zip(found, found[1:]))
    keyed = keyed_lines(data, fmt)
    changes = {at for (at, key), (_, before) in zip(keyed[1:], keyed) if key != before}
    for part in found:
        assert part.first_line == data[:part.start].count(b"\n") + 1
        assert part.start in changes | {0, len(data)}


def test_a_cut_falls_after_the_prompt_around_the_middle(tmp_path):
    """The cut for 2 workers is the first prompt change after the middle byte, whichever line holds it."""
    rows = [f"p{p}\t{r}\t-1\thyp {r}\n" for p in "abcd" for r in (1, 2, 3)]  # equal lines: the middle is in b's
    rows.insert(0, "prompt_id\trank\tscore\thypothesis\n")
    data = "".join(rows).encode()
    (tmp_path / "n.tsv").write_bytes(data)
    cut = ranges(tmp_path / "n.tsv", "tsv", 2)[0].end
    assert cut == data.index(b"pc\t1")
    assert ranges(tmp_path / "n.tsv", "tsv", 2)[1].first_line == 8  # header + a's 3 + b's 3, then c from line 8


def test_a_line_of_no_prompt_goes_with_the_lines_before_it(tmp_path):
    """A blank line inside a prompt's lines is no prompt boundary: no cut splits the prompt there."""
    rows = ["pa\t1\t-1\tx\n", "\n", "pa\t2\t-1\ty\n", "pb\t1\t-1\tz\n"]
    data = "".join(rows).encode()
    (tmp_path / "n.tsv").write_bytes(data)
    for jobs in JOBS:
        assert {r.start for r in ranges(tmp_path / "n.tsv", "tsv", jobs)} <= {0, data.index(b"pb"), len(data)}


@pytest.mark.parametrize("fmt", RANGED)
def test_a_part_reads_its_range_only(parts_case, fmt):
    _, _, tmp = parts_case
    path = tmp / f"nbest.{fmt}"
    data = path.read_bytes()
    for k, part in enumerate(ranges(path, fmt, 3)):
        with open_part(str(path), fmt, k, 3, 1 << 20) as lines:
            read = list(lines)
            assert lines.file.left == 0  # every byte of the range read, and no more
        expected = data[part.start:part.end].decode().splitlines()
        assert [text for _, text in read] == expected
        assert [number for number, _ in read] == list(range(part.first_line, part.first_line + len(expected)))


def test_a_part_parses_its_own_lines_only(parts_case, monkeypatch):
    gold, nbest, tmp = parts_case
    path = tmp / "nbest.tsv"
    parsed = []
    monkeypatch.setattr("nbest_eval.formats.tsv.parse_score", lambda text, path, line: parsed.append(line) or -1.0)
    second = ranges(path, "tsv", 3)[1]
    with open(path, "rb") as file:
        listed = dict(FileParts(LineSource(file, str(path)), gold, "tsv").read(1, 3))
    count = path.read_bytes()[second.start:second.end].count(b"\n")
    assert parsed == list(range(second.first_line, second.first_line + count))
    assert listed and all(len(listed[pid]) == len(nbest[pid]) for pid in listed)


@pytest.mark.parametrize("fmt", ["tsv", "moses", "jsonl", "staple"])
@pytest.mark.parametrize("crlf", [False, True])
def test_any_number_of_parts_gives_the_in_memory_values(parts_case, fmt, crlf):
    gold, _, tmp = parts_case
    path = tmp / f"nbest.{fmt}"
    if crlf:
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    expected = Scorer(METRICS).score(gold, read_nbest(path, gold)).values
    for jobs in (1, *JOBS):
        result = score(tmp, path, "--jobs", str(jobs), "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert {k: v for k, v in json.loads(result.stdout).items() if k in expected} == expected, jobs


def test_fewer_prompts_than_workers(parts_case):
    gold, nbest, tmp = parts_case
    two = {pid: nbest[pid] for pid in list(nbest)[:2]}
    write_nbest(two, tmp / "two.tsv", "tsv")
    expected = Scorer(METRICS).score(gold, two).values
    for jobs in JOBS:
        values = json.loads(score(tmp, tmp / "two.tsv", "--jobs", str(jobs)).stdout)
        assert {k: values[k] for k in expected} == expected, jobs
    (tmp / "header.tsv").write_text("prompt_id\trank\tscore\thypothesis\n\n")  # no list in any part
    assert "no n-best list found" in score(tmp, tmp / "header.tsv", "--jobs", "3", "--format", "tsv").stderr


def test_a_prompt_in_two_parts_is_ungrouped_and_read_whole(parts_case):
    """A prompt whose later lines come at the end of the file: the last part meets it again, the
    merge raises Ungrouped (even where rank gaps are allowed, so that no part sees a gap), and score
    reads the file whole, as one process does."""
    gold, nbest, tmp = parts_case
    first = next(pid for pid in nbest if len(nbest[pid]) > 1)
    lines = (tmp / "nbest.tsv").read_text().splitlines(keepends=True)
    moved = [line for line in lines if line.startswith(first + "\t") and not line.startswith(first + "\t1\t")]
    (tmp / "back.tsv").write_text("".join([line for line in lines if line not in moved] + moved))
    with open(tmp / "back.tsv", "rb") as file:
        parts = FileParts(LineSource(file, str(tmp / "back.tsv")), gold, "tsv", allow_rank_gaps=True)
        with pytest.raises(Ungrouped) as raised:
            score_stream(Scorer(METRICS), gold, iter([]), jobs=3, parts=parts)
    assert raised.value.prompt_id == first and "from here" in raised.value.why
    assert raised.value.line == ranges(tmp / "back.tsv", "tsv", 3)[2].first_line
    assert json.loads(score(tmp, tmp / "back.tsv", "--jobs", "3").stdout) == \
        json.loads(score(tmp, tmp / "nbest.tsv", "--jobs", "1").stdout)
    moses = (tmp / "nbest.moses").read_text().splitlines(keepends=True)
    (tmp / "twice.moses").write_text("".join(moses + moses[:1]))  # two outputs concatenated: an error
    one, many = (score(tmp, tmp / "twice.moses", "--jobs", jobs) for jobs in ("1", "3"))
    assert one.returncode == many.returncode == 2 and "concatenated" in one.stderr
    assert many.stderr.splitlines()[-1] == one.stderr.splitlines()[-1]


def _broken(tmp, line_numbers, fix):
    """nbest.tsv with ``fix`` applied to the given 1-based lines, as bad.tsv."""
    lines = (tmp / "nbest.tsv").read_text().splitlines(keepends=True)
    for number in line_numbers:
        lines[number - 1] = fix(lines[number - 1])
    (tmp / "bad.tsv").write_text("".join(lines))
    return tmp / "bad.tsv"


def test_an_error_names_the_line_in_the_file_from_any_part(parts_case):
    """A worker that starts mid-file numbers its lines as the file does; with errors in two parts,
    the earlier in the file is the one reported, as with one process."""
    _, _, tmp = parts_case
    path = tmp / "nbest.tsv"
    size_lines = path.read_text().count("\n")
    last = ranges(path, "tsv", 3)[2].first_line + 2  # inside the last part
    middle = ranges(path, "tsv", 3)[1].first_line + 1
    bad_score = lambda line: line.replace("\t-", "\tnot-a-score-", 1)  # noqa: E731
    for numbers, reported in (([last], last), ([middle, last], middle)):
        bad = _broken(tmp, numbers, bad_score)
        one, three = score(tmp, bad, "--jobs", "1"), score(tmp, bad, "--jobs", "3")
        assert one.returncode == three.returncode == 2
        assert f"bad.tsv:{reported}: score 'not-a-score" in three.stderr
        assert three.stderr.splitlines()[-1] == one.stderr.splitlines()[-1]
    assert last < size_lines
    duplicate = _broken(tmp, [last + 1], lambda _: (tmp / "nbest.tsv").read_text().splitlines(True)[last - 1])
    one, three = score(tmp, duplicate, "--jobs", "1"), score(tmp, duplicate, "--jobs", "3")
    assert f"(first at line {last})" in three.stderr  # a line number inside a message too
    assert three.stderr.splitlines()[-1] == one.stderr.splitlines()[-1]


class _NeedsTwo(Exception):
    """An error that pickles but does not unpickle (its __init__ wants two arguments, pickle gives one)."""

    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


class _Failing:
    """A file's parts whose second part's reading fails with ``error``, which the queue cannot carry."""

    def __init__(self, error):
        self.error = error

    def read(self, part, parts):
        if part == 1:
            raise self.error
        return iter([])


@pytest.mark.parametrize("error, message", [(ValueError(lambda: None), "ValueError: <function"),  # no pickling
                                            (_NeedsTwo("bad", "line 3"), "_NeedsTwo: bad at line 3")])
def test_a_part_error_that_cannot_be_pickled_still_ends_the_merge(parts_case, error, message):
    gold, _, _ = parts_case
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the merge waited for the part forever"))
    signal.alarm(30)
    try:
        with pytest.raises(RuntimeError, match=message):
            score_stream(Scorer(METRICS), gold, iter([]), jobs=2, parts=_Failing(error))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_one_based_moses_file_is_refused_as_with_one_process(tmp_path):
    """The check of a moses file's first lines is made on the file's first lines, as with one process."""
    gold, _ = random_case(9, n_prompts=30, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    rows = [f"{n + 1} ||| {text} ||| F0= -1 ||| -1" for n, p in enumerate(gold.prompts[:-1]) for text, _ in
            p.translations]  # each prompt's own translations, numbered from 1: the ids look shifted
    (tmp_path / "one.moses").write_text("\n".join(rows) + "\n")
    one, three = (score(tmp_path, tmp_path / "one.moses", "--jobs", jobs) for jobs in ("1", "3"))
    assert one.returncode == three.returncode == 2 and "look 1-based" in one.stderr
    assert three.stderr.splitlines()[-1] == one.stderr.splitlines()[-1]
    (tmp_path / "zero.moses").write_text("".join(f"{n} ||| {text} ||| F0= -1 ||| -1\n" for n, p in
                                                 enumerate(gold.prompts) for text, _ in p.translations))
    assert score(tmp_path, tmp_path / "zero.moses", "--jobs", "3").returncode == 0
