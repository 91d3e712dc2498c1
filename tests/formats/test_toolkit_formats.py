"""Other toolkits' n-best files: Moses/Marian ``N ||| hypothesis ||| features ||| total``
lists and OpenNMT-py / CTranslate2 style plain output, K lines per prompt (``--format lines --nbest-size K``).

Readers (whole file and streaming), writers, detection, strict errors at FILE:LINE, the CLI options,
and fuzzing: whatever bytes either reader gets, it ends in a result or an InputError.
"""

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from cases import FUZZ_PIECES, edit, raises_at, random_case
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import LineSource, detect_format, iter_nbest, read_nbest, write_nbest

# Moses's own spacing: each word ends with a space, then '|||'; features ' Name= v ...'; fields after
# the total (here the word alignment, -print-alignment-info-in-n-best) are ignored
MOSES = """\
0 ||| bem , o que o treinador disse ? ||| LM0= -32.2511 WordPenalty0= -8 PhrasePenalty0= 4 \
TranslationModel0= -4.21 -5.01 -2.3 -6.1 Distortion0= 0 ||| -11.4875 ||| 0-0 1-1 2-2 3-3
0 ||| bem , o que disse o treinador ? ||| LM0= -35.03 WordPenalty0= -8 PhrasePenalty0= 5 \
TranslationModel0= -4.4 -5.2 -2.9 -6.3 Distortion0= -2 ||| -12.102 ||| 0-0 1-1 2-2 3-3
1 ||| olá ||| LM0= -3.5 WordPenalty0= -1 PhrasePenalty0= 1 TranslationModel0= -0.1 -0.2 -0.3 -0.4 \
Distortion0= 0 ||| -1.3 ||| 0-0
1 ||| oi ||| ||| -2.5e-01
"""
MOSES_LISTS = {"p1": [Hyp("bem , o que o treinador disse ?", -11.4875),
                      Hyp("bem , o que disse o treinador ?", -12.102)],
               "p2": [Hyp("olá", -1.3), Hyp("oi", -0.25)]}

# marian-decoder --n-best: ' F0=SCORE' alone, or ' F0= s F1= s ...' with a score breakdown (rescoring)
MARIAN = """\
0 ||| bem, o que o treinador disse? ||| F0= -2.51 F1= -3.02 ||| -0.452
0 ||| o que o treinador disse? ||| F0= -3.1 F1= -2.9 ||| -0.61
2 ||| nada ||| F0=-1.25 ||| -inf
"""
MARIAN_LISTS = {"p1": [Hyp("bem, o que o treinador disse?", -0.452), Hyp("o que o treinador disse?", -0.61)],
                "p3": [Hyp("nada", -math.inf)]}

LINES = "bem, o que o treinador disse?\nnada\n\nolá\noi\nolá\nnada\n\nnão\n"  # 3 per prompt: K = 3
LINES_LISTS = {"p1": [Hyp("bem, o que o treinador disse?"), Hyp("nada"), Hyp("")],
               "p2": [Hyp("olá"), Hyp("oi"), Hyp("olá")],
               "p3": [Hyp("nada"), Hyp(""), Hyp("não")]}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def streamed(path: Path, gold: Gold, fmt: str, **options) -> list:
    with open(path, "rb") as file:
        return list(iter_nbest(LineSource(file, str(path)), gold, fmt, **options))




# ---------------------------------------------------------------- moses

@pytest.mark.parametrize("text, lists", [(MOSES, MOSES_LISTS), (MARIAN, MARIAN_LISTS)], ids=["moses", "marian"])
def test_moses_and_marian_output(gold, tmp_path, text, lists):
    path = write(tmp_path, "out.nbest", text)
    assert detect_format(path) == "moses"
    assert read_nbest(path, gold) == lists
    assert streamed(path, gold, "moses") == list(lists.items())


def test_moses_padding_and_order(gold, tmp_path):
    """One space of padding each side of a hypothesis goes, the rest stays; ids and scores may have any;
    sentences may come in any order as long as each one's lines are together."""
    path = write(tmp_path, "out.nbest", "2 |||  two spaces  ||| ||| -1\n2 ||| ||| F0= -2 ||| -2\n\n"
                                        "  0   |||x|||  |||  -inf  \n")
    assert read_nbest(path, gold, "moses") == {"p1": [Hyp("x", -math.inf)],
                                               "p3": [Hyp(" two spaces ", -1.0), Hyp("", -2.0)]}


@pytest.mark.parametrize("text, line, match", [
    ("0 ||| a ||| -1\n", 1, "expected 'N ||| hypothesis ||| feature scores ||| total score', got 3 field(s)"),
    ("0 ||| a\n", 1, "got 2 field(s)"),
    ("x ||| a ||| ||| -1\n", 1, "sentence id 'x' is not a number (ASCII digits only)"),
    ("+1 ||| a ||| ||| -1\n", 1, "sentence id '+1' is not a number"),
    ("٣ ||| a ||| ||| -1\n", 1, "sentence id '٣' is not a number"),
    ("0 ||| a ||| ||| -1\n3 ||| b ||| ||| -1\n", 2, "sentence id 3 is out of range: the gold has 3 prompts"),
    ("9" * 5000 + " ||| a ||| ||| -1\n", 1, "sentence id of 5000 digits is out of range"),
    ("0 ||| a ||| F0= x ||| x\n", 1, "score 'x' is not a number"),
    ("0 ||| a ||| ||| nan\n", 1, "score 'nan' is not a number"),
    ("0 ||| a ||| ||| 1e999\n", 1, "+inf is not a log-probability"),
    ("0 ||| a ||| ||| \n", 1, "score '' is not a number"),
    ("0 ||| a ||| ||| -1\n1 ||| b ||| ||| -1\n0 ||| c ||| ||| -2\n", 3,
     "duplicate sentence 0 after other sentences' lines (two outputs concatenated?) (first at line 1)"),
    ("0 ||| a ||| 0-0 1-1 ||| F0= -1.5 ||| -0.7\n", 1, "Marian run with --alignment writes the alignment as a 3rd"),
    ("0 ||| a ||| ||| -1\n1 ||| a\rb ||| ||| -1\n", 2, "carriage return (CR) inside a line"),
])
@pytest.mark.parametrize("how", ["whole", "streamed"])
def test_moses_errors(gold, tmp_path, text, line, match, how):
    path = write(tmp_path, "out.nbest", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "moses") if how == "whole" else streamed(path, gold, "moses")


def test_moses_file_without_lists(gold, tmp_path):
    path = write(tmp_path, "out.nbest", "\n  \n")
    with raises_at(path, None, "no n-best list found (read as moses)"):
        read_nbest(path, gold, "moses")


def test_moses_streams_each_list_before_the_file_ends(gold, tmp_path):
    """A list is complete when the next sentence's first line is read: before any later line."""
    path = write(tmp_path, "out.nbest", "1 ||| olá ||| ||| -1\n1 ||| oi ||| ||| -2\n0 ||| x ||| ||| -1\n"
                                        "0 ||| y ||| ||| oops\n")
    with open(path, "rb") as file:
        groups = iter_nbest(LineSource(file, str(path)), gold, "moses")
        assert next(groups) == ("p2", [Hyp("olá", -1.0), Hyp("oi", -2.0)])
        with raises_at(path, 4, "score 'oops' is not a number"):
            next(groups)


# ---------------------------------------------------------------- lines

def test_lines_output(gold, tmp_path):
    path = write(tmp_path, "pred.txt", LINES)
    assert read_nbest(path, gold, "lines", nbest_size=3) == LINES_LISTS
    assert streamed(path, gold, "lines", nbest_size=3) == list(LINES_LISTS.items())
    one = write(tmp_path, "best.txt", "a\r\nb\n\ufeffc")  # CRLF, no final line end; a BOM only at the start
    assert read_nbest(one, gold, "lines", nbest_size=1) == {"p1": [Hyp("a")], "p2": [Hyp("b")], "p3": [Hyp("\ufeffc")]}


@pytest.mark.parametrize("text, line, match", [
    ("a\n" * 7, 7, "the file has 7 lines, not 3 gold prompts x 2 (--nbest-size) = 6: line 7 is the first too many"),
    ("a\n" * 9, 7, "the file has 9 lines, not 3 gold prompts x 2 (--nbest-size) = 6"),
    ("a\n" * 5, 5, "the file has 5 lines, not 3 gold prompts x 2 (--nbest-size) = 6: it ends inside the list of "
                   "prompt 'p3'"),
    ("a\n" * 4, 4, "the file has 4 lines, not 3 gold prompts x 2 (--nbest-size) = 6: the last 1 prompt(s) have no "
                   "lines"),
    ("", None, "the file has 0 lines, not 3 gold prompts x 2 (--nbest-size) = 6"),
    ("a\nb\rc\n", 2, "carriage return (CR) inside a line"),
])
@pytest.mark.parametrize("how", ["whole", "streamed"])
def test_lines_errors(gold, tmp_path, text, line, match, how):
    path = write(tmp_path, "pred.txt", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "lines", nbest_size=2) if how == "whole" else streamed(path, gold, "lines",
                                                                                      nbest_size=2)


def test_lines_streams_every_k_lines(gold, tmp_path):
    path = write(tmp_path, "pred.txt", "a\nb\nc\n")
    with open(path, "rb") as file:
        groups = iter_nbest(LineSource(file, str(path)), gold, "lines", nbest_size=2)
        assert next(groups) == ("p1", [Hyp("a"), Hyp("b")])  # before the short file's error
        with raises_at(path, 3, "the file has 3 lines"):
            next(groups)


@pytest.mark.parametrize("fmt, options, match", [
    ("lines", {}, "the lines format needs nbest_size (--nbest-size K)"),
    ("lines", {"nbest_size": 0}, "the lines format needs nbest_size"),
    ("tsv", {"nbest_size": 2}, "nbest_size (--nbest-size) is for the lines format only, not tsv"),
    ("auto", {"nbest_size": 2}, "is for the lines format only, not moses"),  # lines is never detected
])
def test_nbest_size_goes_with_lines_only(gold, tmp_path, fmt, options, match):
    path = write(tmp_path, "out.nbest", "0 ||| a ||| ||| -1\n" if fmt == "auto" else "a\nb\n")
    with raises_at(path, None, match):
        read_nbest(path, gold, fmt, **options)
    with raises_at(path, None, match), open(path, "rb") as file:
        next(iter_nbest(LineSource(file, str(path)), gold, "moses" if fmt == "auto" else fmt, **options))


def test_lines_are_never_detected(tmp_path):
    path = write(tmp_path, "pred.txt", LINES)
    with raises_at(path, None, "use --format with one of staple, fairseq, tsv, jsonl, moses, or lines with "
                               "--nbest-size K"):
        detect_format(path)


# ---------------------------------------------------------------- writers

# what the formats hold: a line holds any text without a line break; a Moses line no '|||' either, and a
# score (finite, or -inf)
line_texts = st.text().filter(lambda t: not set(t) & set("\n\r\0"))
scores = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.just(-math.inf))
moses_hyps = st.builds(Hyp, line_texts.filter(lambda t: "|||" not in t), scores)


def test_moses_round_trip(tmp_path_factory):
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}") for i in range(4)])

    @settings(max_examples=60, deadline=None)
    @given(st.dictionaries(st.sampled_from(gold.ids()), st.lists(moses_hyps, min_size=1, max_size=5), min_size=1))
    def check(lists):
        nbest = {pid: lists[pid] for pid in gold.ids() if pid in lists}
        path = tmp_path_factory.mktemp("moses") / "n"
        write_nbest(nbest, path, "moses", gold=gold)
        assert read_nbest(path, gold, "moses") == nbest
        assert read_nbest(path, gold) == nbest  # detected

    check()


def test_lines_round_trip(tmp_path_factory):
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}") for i in range(4)])

    @settings(max_examples=60, deadline=None)
    @given(st.integers(1, 4).flatmap(lambda k: st.lists(st.lists(st.builds(Hyp, line_texts, scores), min_size=k,
                                                                 max_size=k),
                                                        min_size=4, max_size=4)))
    def check(lists):
        nbest = dict(zip(gold.ids(), lists))
        path = tmp_path_factory.mktemp("lines") / "n"
        write_nbest(nbest, path, "lines", gold=gold)
        k = len(lists[0])
        assert read_nbest(path, gold, "lines", nbest_size=k) == {
            pid: [Hyp(h.text) for h in hyps] for pid, hyps in nbest.items()}  # scores are dropped

    check()


def test_the_moses_writer_writes_marian_layout(gold, tmp_path):
    write_nbest({"p2": [Hyp("olá", -0.5), Hyp(" oi", -math.inf)], "p1": [Hyp("", 2.5e-07)]}, tmp_path / "n", "moses",
                gold=gold)
    assert (tmp_path / "n").read_text().splitlines() == [
        "1 ||| olá ||| F0= -0.5 ||| -0.5", "1 |||  oi ||| F0= -inf ||| -inf", "0 |||  ||| F0= 2.5e-07 ||| 2.5e-07"]


@pytest.mark.parametrize("fmt, nbest, match", [
    ("moses", {"p1": [Hyp("a ||| b", -1.0)]}, "hypothesis 'a ||| b' contains '|||', which a Moses file cannot hold"),
    ("moses", {"p1": [Hyp("a|||b", -1.0)]}, "contains '|||'"),
    ("moses", {"p1": [Hyp("a\nb", -1.0)]}, "contains '\\n', which a Moses file cannot hold"),
    ("moses", {"p1": [Hyp("a", -1.0), Hyp("b")]}, "prompt 'p1', rank 2 has no score, which a Moses n-best line must "
                                                  "have"),
    ("moses", {"p1": [Hyp("a", math.nan)]}, "score nan cannot be written to a Moses file"),
    ("moses", {"p1": [Hyp("a", math.inf)]}, "score inf cannot be written to a Moses file"),
    ("moses", {"p9": [Hyp("a", -1.0)]}, "prompt id 'p9' is not in the gold"),
    ("lines", {"p1": [Hyp("a")], "p2": [Hyp("b")]}, "gold prompt 'p3' has no list"),
    ("lines", {"p1": [Hyp("a")], "p2": [Hyp("b"), Hyp("c")], "p3": [Hyp("d")]}, "the lists have from 1 to 2 "
                                                                               "hypotheses"),
    ("lines", {"p1": [], "p2": [], "p3": []}, "the lists have no hypotheses"),
    ("lines", {"p1": [Hyp("a")], "p2": [Hyp("b\rc")], "p3": [Hyp("d")]}, "contains '\\r', which a lines file"),
    ("lines", {"p1": [Hyp("a")], "p2": [Hyp("b")], "p3": [Hyp("d")], "p9": [Hyp("e")]}, "'p9' is not in the gold"),
])
def test_moses_and_lines_writers_refuse_what_they_cannot_hold(gold, tmp_path, fmt, nbest, match):
    with raises_at(tmp_path / "out", None, match):
        write_nbest(nbest, tmp_path / "out", fmt, gold=gold)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", ["moses", "lines"])
def test_writers_need_the_gold(tmp_path, fmt):
    with raises_at(tmp_path / "out", None, "needs the gold"):
        write_nbest({"p1": [Hyp("a", -1.0)]}, tmp_path / "out", fmt)


# ---------------------------------------------------------------- streaming = whole file

@pytest.mark.parametrize("seed", range(3))
def test_streaming_equals_whole_file_reading(tmp_path, seed):
    gold, nbest = random_case(seed, n_prompts=30)
    write_nbest(nbest, tmp_path / "n.moses", "moses", gold=gold)
    assert streamed(tmp_path / "n.moses", gold, "moses") == list(read_nbest(tmp_path / "n.moses", gold).items())
    filler = [Hyp("filler", -20.0)] * 3
    three = {pid: (nbest.get(pid, []) + filler)[:3] for pid in gold.ids()}
    write_nbest(three, tmp_path / "n.txt", "lines", gold=gold)
    whole = read_nbest(tmp_path / "n.txt", gold, "lines", nbest_size=3)
    assert streamed(tmp_path / "n.txt", gold, "lines", nbest_size=3) == list(whole.items())
    assert whole == {pid: [Hyp(h.text) for h in hyps] for pid, hyps in three.items()}


# ---------------------------------------------------------------- command line

def run(*argv) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


def test_score_a_moses_file(gold, tmp_path):
    path = write(tmp_path, "out.nbest", MARIAN)
    code, out, err = run("score", "--gold", tmp_path / "gold.txt", "--nbest", path, "--json", "--metrics", "map,wf1",
                         "--jobs", "1")
    assert code == 0, err
    assert f"reading {path} as moses (detected)" in err
    values = json.loads(out)
    assert {k: values[k] for k in ("map", "wf1")} == Scorer(["map", "wf1"]).score(gold, MARIAN_LISTS).values


def test_score_lines_with_nbest_size(gold, tmp_path):
    path = write(tmp_path, "pred.txt", LINES)
    code, out, err = run("score", "--gold", tmp_path / "gold.txt", "--nbest", path, "--format", "lines",
                         "--nbest-size", "3", "--json", "--metrics", "map,wf1", "--jobs", "1")
    assert code == 0, err
    values = json.loads(out)
    assert {k: values[k] for k in ("map", "wf1")} == Scorer(["map", "wf1"]).score(gold, LINES_LISTS).values
    code, _, err = run("score", "--gold", tmp_path / "gold.txt", "--nbest", path, "--format", "lines",
                       "--nbest-size", "2")
    assert code == 2 and f"{path}:7: the file has 9 lines, not 3 gold prompts x 2 (--nbest-size) = 6" in err, err


def test_convert_wrong_line_count(gold_file, tmp_path):
    path = write(tmp_path, "pred.txt", LINES)
    code, _, err = run("convert", "--gold", gold_file, "--nbest", path, "--format", "lines",
                       "--nbest-size", "2", "--to", "tsv", tmp_path / "out.tsv")
    assert code == 2 and f"{path}:7: the file has 9 lines, not 3 gold prompts x 2 (--nbest-size) = 6" in err, err
    assert not (tmp_path / "out.tsv").exists()


def test_convert_lines_and_moses(gold, tmp_path):
    path, tsv, moses, lines = write(tmp_path, "pred.txt", LINES), tmp_path / "n.tsv", tmp_path / "n.moses", \
        tmp_path / "n.txt"
    assert run("convert", "--gold", tmp_path / "gold.txt", "--nbest", path, "--format", "lines", "--nbest-size", 3,
               "--to", "tsv", tsv)[0] == 0
    assert read_nbest(tsv, gold) == LINES_LISTS
    marian = write(tmp_path, "marian.nbest", MARIAN)
    assert run("convert", "--gold", tmp_path / "gold.txt", "--nbest", marian, "--to", "moses", moses)[0] == 0
    assert read_nbest(moses, gold) == MARIAN_LISTS
    assert run("convert", "--gold", tmp_path / "gold.txt", "--nbest", tsv, "--to", "lines", lines)[0] == 0
    assert lines.read_text(encoding="utf-8") == LINES


@pytest.mark.parametrize("options, match", [
    (["--format", "lines"], "error: --format lines needs --nbest-size K"),
    (["--nbest-size", "3"], "error: --nbest-size is for --format lines only, not auto (lines is never detected"),
    (["--format", "tsv", "--nbest-size", "3"], "error: --nbest-size is for --format lines only, not tsv"),
])
@pytest.mark.parametrize("command", [["score"], ["convert", "--to", "tsv", "-"]])
def test_nbest_size_on_the_command_line(gold_file, tmp_path, options, match, command):
    path = write(tmp_path, "pred.txt", LINES)
    code, _, err = run(command[0], "--gold", gold_file, "--nbest", path, *command[1:], *options)
    assert code == 2 and match in err, err


def test_nbest_size_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["score", "--gold", "g", "--nbest", "n", "--format", "lines", "--nbest-size", "0"])
    assert "--nbest-size: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_score_help_lists_the_formats(capsys):
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    help = " ".join(capsys.readouterr().out.split())
    assert "{auto,staple,fairseq,tsv,jsonl,moses,lines}" in help and "--nbest-size K" in help


# ---------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=100, deadline=None)
MOSES_PIECES = FUZZ_PIECES + ["|||", " ||| ", "0 ||| ", "2 ||| ", "3 ||| ", "F0= ", "F0=-1", "-0.5", " ", "0-0 1-1"]
VALID = {"moses": MOSES + MARIAN.replace("0 |||", "1 |||", 2), "lines": LINES}
NBEST_SIZE = {"moses": None, "lines": 3}


def read_any(fmt: str, data: bytes, gold: Gold) -> None:
    """Read whole and streamed, with a small line limit; anything but a result or an InputError fails."""
    for read in (lambda lines: read_nbest(lines, gold, fmt, nbest_size=NBEST_SIZE[fmt]),
                 lambda lines: list(iter_nbest(lines, gold, fmt, nbest_size=NBEST_SIZE[fmt]))):
        try:
            read(LineSource(io.BytesIO(data), "fuzz", max_line_bytes=256))
        except InputError:
            pass


@pytest.mark.parametrize("fmt", ["moses", "lines"])
def test_random_moses_and_lines_bytes_end_in_a_result_or_an_input_error(gold, fmt):
    @FUZZ
    @given(st.binary(max_size=600) |
           st.lists(st.sampled_from(MOSES_PIECES), max_size=40).map(lambda p: "".join(p).encode()))
    def check(data):
        read_any(fmt, data, gold)

    check()


@pytest.mark.parametrize("fmt", ["moses", "lines"])
def test_edited_moses_and_lines_files_end_in_a_result_or_an_input_error(gold, fmt):
    edits = st.tuples(st.sampled_from(["delete", "duplicate", "swap", "cut", "splice", "insert"]),
                      st.integers(0, 10**6), st.sampled_from(MOSES_PIECES) | st.text(max_size=8))

    @FUZZ
    @given(st.lists(edits, min_size=1, max_size=6))
    def check(changes):
        lines = VALID[fmt].split("\n")
        for action, index, piece in changes:
            lines = edit(lines, action, index, piece)
        read_any(fmt, "\n".join(lines).encode("utf-8", "surrogatepass"), gold)

    check()


def test_lines_through_the_api_and_compare(gold, tmp_path):
    import nbest_eval

    path = write(tmp_path, "pred.txt", LINES)
    expected = Scorer(["map", "wf1"]).score(gold, LINES_LISTS).values
    assert nbest_eval.score(tmp_path / "gold.txt", path, metrics="map,wf1", format="lines", nbest_size=3).values \
        == expected
    other = write(tmp_path, "other.txt", LINES)
    code, out, err = run("compare", "--gold", tmp_path / "gold.txt", "--nbest", path, other, "--format", "lines",
                         "--nbest-size", "3", "--metrics", "wf1", "--json")
    assert code == 0, err
    code, _, err = run("compare", "--gold", tmp_path / "gold.txt", "--nbest", path, other, "--format", "lines")
    assert code == 2 and "--format lines needs --nbest-size" in err
