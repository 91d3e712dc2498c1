"""File formats: readers, writers (strict JSON), format detection (how far it looks, what it is not
fooled by), TREC export and the convert command."""

import math
import random
from pathlib import Path

import pytest
import pytrec_eval
from cases import FAIRSEQ_OUTPUT, THREE_PROMPT_GOLD, line_source, raises_at, random_case, strict_json
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, Scorer, norm
from nbest_eval.cli import main
from nbest_eval.cli.common import warn_not_finite
from nbest_eval.formats import (
    FORMATS,
    detect_format,
    read_gold,
    read_nbest,
    save_nbest,
    write_gold,
    write_nbest,
    write_trec,
)
from nbest_eval.formats.common import json_text
from nbest_eval.formats.trec import docno


def write(tmp_path: Path, name: str, text) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- gold

def test_read_gold(gold, tmp_path):
    assert gold.ids() == ["p1", "p2", "p3"]
    assert gold.path == str(tmp_path / "gold.txt")
    assert gold["p1"].text == "well, what did the coach say?"
    assert gold["p1"].translations == (("bem, o que o treinador disse?", 0.5),
                                       ("o treinador | a treinador disse", 0.25))
    assert gold["p3"].translations == ()  # nil-answer prompt


def test_read_gold_crlf_and_bom(tmp_path):
    crlf = write(tmp_path, "g.txt", b"\xef\xbb\xbf" + THREE_PROMPT_GOLD.replace("\n", "\r\n").encode())
    assert [(p.id, p.text, p.translations) for p in read_gold(crlf)] == \
        [(p.id, p.text, p.translations) for p in read_gold(write(tmp_path, "h.txt", THREE_PROMPT_GOLD))]


@pytest.mark.parametrize("text, line, match", [
    ("p1|hi\nola\n", 2, "no '|'"),
    ("p1|hi\nola|0.5\nhey|abc\n", 3, "'abc' is not a number"),
    ("p1|hi\nola|-0.5\n", 2, "non-negative"),
    ("p1|hi\nola|nan\n", 2, "finite"),
    ("p1|hi\nola|inf\n", 2, "finite"),
    ("p1|hi\nola|0.5\n\noi|0.25\n", 4, "no 'ID|PROMPT' line"),
    ("p1|hi\nola|0.5\n\n\nbom dia|tchau\n", 5, "no 'ID|PROMPT' line"),
    ("p1|hi\n\n|no id\n", 3, "expected an 'ID|PROMPT' line"),
    ("p1|hi\nola|1\n\np2|a\n\np1|hi again\n", 6, "duplicate prompt id 'p1' (first at line 1)"),
    (b"p1|hi\n\xffola|1\n", 2, "not UTF-8"),
])
def test_gold_errors(tmp_path, text, line, match):
    path = write(tmp_path, "bad.gold", text)
    with raises_at(path, line, match):
        read_gold(path)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_gold(tmp_path, text):
    path = write(tmp_path, "empty.gold", text)
    with raises_at(path, None, "empty gold file"):
        read_gold(path)


def test_missing_file(tmp_path):
    with raises_at(tmp_path / "nope.txt", None, "cannot read"):
        read_gold(tmp_path / "nope.txt")


# ---------------------------------------------------------------- staple predictions

def test_read_staple_nbest(gold, tmp_path):
    path = write(tmp_path, "pred.txt", "p2|hi\nolá | oi\n  olá\n\np1|x\nbem\n\np3|nothing valid\n")
    assert read_nbest(path, gold, "staple") == {
        "p1": [Hyp("bem")], "p2": [Hyp("olá | oi"), Hyp("  olá")], "p3": []}
    assert list(read_nbest(path, gold)) == ["p1", "p2", "p3"]  # gold order


@pytest.mark.parametrize("text, line, match", [
    ("p1|a\nx\n\np1|a\ny\n", 4, "duplicate prompt id 'p1' (first at line 1)"),
    ("p1|a\nx\n\np9|a\ny\n", 4, "prompt id 'p9' is not in the gold"),
    ("p1|a\nx\n\n\ny\n", 5, "expected an 'ID|PROMPT' line"),
])
def test_staple_nbest_errors(gold, tmp_path, text, line, match):
    path = write(tmp_path, "pred.txt", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "staple")


# ---------------------------------------------------------------- fairseq

FAIRSEQ_LOG = """\
2024-01-01 12:00:00 | INFO | fairseq_cli.generate | Namespace(nbest=2, beam=5)
2024-01-01 12:00:01 | INFO | fairseq.data.data_utils | loaded 3 examples from: data/test.en-pt.en
"""


SOURCES = {0: "Well , what did the coach say ?", 1: "hi"}  # as fairseq prints them: tokenized


def fairseq_output(with_detok: bool) -> str:
    lines = []
    for sample, hyps in [(1, [("o@@ lá", "olá", -1.0), ("o@@ i", "oi", -2.5)]),
                         (0, [("bem", "bem,", -0.5)])]:
        lines += [f"S-{sample}\t{SOURCES[sample]}", f"T-{sample}\ttarget"]
        for bpe, detok, score in hyps:
            lines.append(f"H-{sample}\t{score}\t{bpe}")
            if with_detok:
                lines.append(f"D-{sample}\t{score}\t{detok}")
            lines.append(f"P-{sample}\t-0.1 -0.2")
    lines += ["Generate test with beam=5: BLEU4 = 10.00", "W-0\t0.1\tseconds"]
    return FAIRSEQ_LOG + "\n".join(lines) + "\n"


def test_fairseq_prefers_detokenized_lines(gold, tmp_path):
    path = write(tmp_path, "gen.out", fairseq_output(with_detok=True))
    assert detect_format(path) == "fairseq"
    nbest = read_nbest(path, gold)
    assert list(nbest) == ["p1", "p2"]  # sample 0 = the gold's first prompt
    assert [h.text for h in nbest["p2"]] == ["olá", "oi"]
    assert [h.text for h in nbest["p1"]] == ["bem,"]


def test_fairseq_hypothesis_lines_and_base2_scores(gold, tmp_path):
    path = write(tmp_path, "gen.out", fairseq_output(with_detok=False))
    nbest = read_nbest(path, gold, "fairseq")
    assert [h.text for h in nbest["p2"]] == ["o@@ lá", "o@@ i"]
    assert nbest["p2"][0].score == pytest.approx(math.log(0.5))  # log2 p = -1 -> p = 1/2
    assert nbest["p2"][1].score == pytest.approx(-2.5 * math.log(2))


def test_fairseq_empty_hypotheses(gold, tmp_path):
    path = write(tmp_path, "gen.out", "S-2\tnothing valid\nH-2\t-1.2\t\nH-2\t-1.5\t\nH-2\t-2\tok\n")
    assert [h.text for h in read_nbest(path, gold, "fairseq")["p3"]] == ["", "", "ok"]


@pytest.mark.parametrize("text, line, match", [
    ("S-0\twell, what did the coach say?\nH-0\t-0.5\tx\nH-0\tbad\ty\n", 3, "score 'bad' is not a number"),
    ("S-1\thi\nH-1\t-0.5\tx\nS-3\tb\nH-3\t-0.5\ty\n", 4, "sample id 3 is out of range: the gold has 3 prompts"),
    ("S-2\tnothing valid\nH-2\t-1.5\n", 2, "truncated H- line"),  # the hypothesis' tab is missing
])
def test_fairseq_errors(gold, tmp_path, text, line, match):
    path = write(tmp_path, "gen.out", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "fairseq")


def test_no_hypotheses_at_all(gold, tmp_path):
    path = write(tmp_path, "gen.out", FAIRSEQ_LOG + f"S-0\t{SOURCES[0]}\n")
    with raises_at(path, None, "no n-best list found (read as fairseq)"):
        read_nbest(path, gold)


# ---------------------------------------------------------------- tsv

def test_read_tsv(gold, tmp_path):
    path = write(tmp_path, "n.tsv", "prompt_id\trank\tscore\thypothesis\n"
                                    "p2\t2\t-2.5\toi\np1\t1\t\tbem | disse\np2\t1\t-1\tolá\np2\t3\t-inf\t\n")
    assert detect_format(path) == "tsv"
    assert read_nbest(path, gold) == {"p1": [Hyp("bem | disse", None)],
                                      "p2": [Hyp("olá", -1.0), Hyp("oi", -2.5), Hyp("", -math.inf)]}


@pytest.mark.parametrize("text, line, match", [
    ("p1\t1\t-1\tx\np1\t2\t-1\n", 2, "expected 4 tab-separated fields"),
    ("p1\t1\t-1\tx\np1\t2\t-1\ty\tz\n", 2, "got 5"),
    ("p1\tone\t-1\tx\n", 1, "rank 'one' is not an integer >= 1"),
    ("p1\t1\t-1\tx\np1\t0\t-1\ty\n", 2, "rank '0' is not an integer >= 1"),
    ("p1\t1\tabc\tx\n", 1, "score 'abc' is not a number"),
    ("p1\t1\tnan\tx\n", 1, "score 'nan' is not a number"),
    ("p1\t1\t-1\tx\np2\t1\t-1\tx\np1\t1\t-2\ty\n", 3, "duplicate rank 1 for prompt 'p1' (first at line 1)"),
    ("prompt_id\trank\tscore\thypothesis\np1\t1\t-1\tx\np7\t1\t-1\ty\n", 3, "prompt id 'p7' is not in the gold"),
])
def test_tsv_errors(gold, tmp_path, text, line, match):
    path = write(tmp_path, "n.tsv", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "tsv")


# ---------------------------------------------------------------- jsonl

def test_read_jsonl(gold, tmp_path):
    path = write(tmp_path, "n.jsonl", '{"id": "p2", "hyps": ["olá", "oi"], "scores": [-1, null], "src": "hi"}\n'
                                      '\n{"id": "p1", "hyps": []}\n')
    assert detect_format(path) == "jsonl"
    assert read_nbest(path, gold) == {"p1": [], "p2": [Hyp("olá", -1.0), Hyp("oi", None)]}


@pytest.mark.parametrize("text, line, match", [
    ('{"id": "p1", "hyps": ["a"]}\n{"id": "p2", "hyps": ["a"]\n', 2, "invalid JSON"),
    ('["p1", ["a"]]\n', 1, "a JSON list instead of an object"),
    ('{"hyps": ["a"]}\n', 1, "missing key 'id'"),
    ('{"id": "p1"}\n', 1, "missing key 'hyps'"),
    ('{"id": 1, "hyps": ["a"]}\n', 1, "'id' must be a string, got int"),
    ('{"id": "p1", "hyps": "a"}\n', 1, "'hyps' is not a list of strings"),
    ('{"id": "p1", "hyps": ["a", 2]}\n', 1, "'hyps' is not a list of strings"),
    ('{"id": "p1", "hyps": ["a"], "scores": ["-1"]}\n', 1, "'scores' is not a list of numbers or nulls"),
    ('{"id": "p1", "hyps": ["a"], "scores": [true]}\n', 1, "'scores' is not a list of numbers or nulls"),
    ('{"id": "p1", "hyps": ["a"], "scores": [NaN]}\n', 1, "'scores' is not a list of numbers or nulls"),
    ('{"id": "p1", "hyps": ["a"], "scores": [-1, -2]}\n', 1, "'scores' has 2 entries but 'hyps' has 1"),
    ('{"id": "p1", "hyps": ["a"]}\n{"id": "p1", "hyps": ["b"]}\n', 2, "duplicate prompt id 'p1' (first at line 1)"),
    ('{"id": "p1", "hyps": ["a"]}\n{"id": "p0", "hyps": ["b"]}\n', 2, "prompt id 'p0' is not in the gold"),
])
def test_jsonl_errors(gold, tmp_path, text, line, match):
    path = write(tmp_path, "n.jsonl", text)
    with raises_at(path, line, match):
        read_nbest(path, gold, "jsonl")


# ---------------------------------------------------------------- detection

@pytest.mark.parametrize("text, expected", [
    ('\n{"id": "p1", "hyps": []}\n', "jsonl"),
    ("S-0\tsource\nH-0\t-1\tx\n", "fairseq"),
    ("H-0\t-1\tx\n", "fairseq"),
    (FAIRSEQ_LOG + "\n" * 50 + "S-0\tsource\nH-0\t-1\tx\n", "fairseq"),
    ("prompt_id\trank\tscore\thypothesis\n", "tsv"),
    ("p1\t1\t\tx\n", "tsv"),
    ("\n\np1|hi\nolá\n", "staple"),
])
def test_detect_format(tmp_path, text, expected):
    assert detect_format(write(tmp_path, "n.txt", text)) == expected


@pytest.mark.parametrize("text", ["just some text\n", "", "\n\n"])
def test_detect_unknown(tmp_path, text):
    path = write(tmp_path, "n.txt", text)
    with raises_at(path, None, "use --format with one of staple, fairseq, tsv, jsonl, moses, or lines with "
                               "--nbest-size K"):
        detect_format(path)


def test_unknown_format_names(gold, tmp_path):
    path = write(tmp_path, "n.tsv", "p1\t1\t\tx\n")
    with pytest.raises(InputError, match="format 'csv'; choose one of auto, staple, fairseq, tsv, jsonl, moses, "
                                         "lines"):
        read_nbest(path, gold, "csv")
    with pytest.raises(InputError, match="cannot write n-best format 'fairseq'; choose one of staple, tsv, jsonl, "
                                         "moses, lines"):
        write_nbest({"p1": []}, tmp_path / "out", "fairseq")
    assert FORMATS == ("staple", "fairseq", "tsv", "jsonl", "moses", "lines")


def test_detection_only_peeks(gold):
    lines = line_source(FAIRSEQ_OUTPUT)
    assert detect_format(lines) == "fairseq"
    assert read_nbest(lines, gold, "fairseq") == read_nbest(line_source(FAIRSEQ_OUTPUT), gold)


LOG_300_LINES = "".join(f"2024-01-01 12:00:{i % 60:02} | INFO | fairseq_cli.generate | line {i}\n" for i in range(300))
DETECTED = {  # first lines -> the format detected (the reader then names the real trouble)
    "Moses without spaces around |||": ("0|||olá|||F0= -1|||-1\n", "moses"),
    "fairseq output after 300 log lines": (LOG_300_LINES + "S-0\thi\nH-0\t-1\tolá\n", "fairseq"),
    "hydra-style log lines first": ("[2024-01-01 12:00:00,000][fairseq.tasks][INFO] - x\nH-0\t-1\tolá\n", "fairseq"),
    "a tsv whose ids start with {": ("{p1}\t1\t-1\tolá\n", "tsv"),
    "a tsv line with a date id": ("2024-01-01\t1\t\tINFO | x\n", "tsv"),
    "a STAPLE line with INFO in it": ("INFO|prompt\nola\n", "staple"),
}


@pytest.mark.parametrize("text, fmt", DETECTED.values(), ids=DETECTED.keys())
def test_detection_names_the_real_format(text, fmt):
    assert detect_format(line_source(text.encode())) == fmt


# ---------------------------------------------------------------- writers

def test_gold_round_trip(tmp_path):
    gold = Gold([GoldPrompt("p1", "a | b", (("x|y", 0.1 + 0.2), ("", 1e-300), ("z", 0.0))),
                 GoldPrompt("p2", "nil", ()), GoldPrompt("p3", "c", (("w", 3.0),))])
    write_gold(gold, tmp_path / "g.txt")
    again = read_gold(tmp_path / "g.txt")
    assert [(p.id, p.text, p.translations) for p in again] == [(p.id, p.text, p.translations) for p in gold]


def test_real_gold_round_trips_byte_for_byte(staple_dir, tmp_path):
    source = staple_dir / "dev.en_pt.2020-02-20.gold.txt"
    write_gold(read_gold(source), tmp_path / "g.txt")
    assert (tmp_path / "g.txt").read_bytes() == source.read_bytes()


# what each format holds: JSON has no infinities, and +inf is no log-probability
finite = st.floats(allow_nan=False, allow_infinity=False)
scores = {"jsonl": st.one_of(st.none(), finite), "tsv": st.one_of(st.none(), finite, st.just(-math.inf)),
          "staple": st.none()}
texts = {"jsonl": st.text(), "tsv": st.text().filter(lambda t: not set(t) & set("\t\n\r\0")),
         "staple": st.text().filter(lambda t: t.strip() and not set(t) & set("\n\r\0"))}


@pytest.mark.parametrize("fmt", ["jsonl", "tsv", "staple"])
def test_nbest_round_trip(fmt, tmp_path_factory):
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}") for i in range(4)])

    # a TSV file has no line for an empty list (which scores like an absent one)
    hyps = st.lists(st.tuples(texts[fmt], scores[fmt]), min_size=1 if fmt == "tsv" else 0, max_size=5)

    @settings(max_examples=40, deadline=None)
    @given(st.dictionaries(st.sampled_from(gold.ids()), hyps, min_size=1))
    def check(lists):
        nbest = {pid: [Hyp(t, None if fmt == "staple" else s) for t, s in lists[pid]]
                 for pid in gold.ids() if pid in lists}
        path = tmp_path_factory.mktemp(fmt) / "n"
        write_nbest(nbest, path, fmt, gold=gold)
        assert read_nbest(path, gold, fmt) == nbest

    check()


def test_writers_never_overwrite(gold, tmp_path):
    nbest = {"p1": [Hyp("a", -1.0)]}
    for fmt in ("staple", "tsv", "jsonl"):
        path = write(tmp_path, f"out.{fmt}", "keep me")
        with raises_at(path, None, "already exists; refusing to overwrite it"):
            write_nbest(nbest, path, fmt, gold=gold)
        assert path.read_text() == "keep me"
        write_nbest(nbest, path, fmt, gold=gold, overwrite=True)
        assert read_nbest(path, gold, fmt)["p1"][0].text == "a"
    path = write(tmp_path, "out.gold", "keep me")
    with raises_at(path, None, "already exists"):
        write_gold(gold, path)


@pytest.mark.parametrize("fmt, nbest, match", [
    ("tsv", {"p1": [Hyp("a\tb")]}, "hypothesis 'a\\tb' contains '\\t', which a TSV file cannot hold"),
    ("staple", {"p1": [Hyp("a\nb")]}, "contains '\\n', which a STAPLE file cannot hold"),
    ("staple", {"p1": [Hyp(" ")]}, "blank hypothesis"),
    ("staple", {"p9": [Hyp("a")]}, "prompt id 'p9' is not in the gold"),
])
def test_writers_refuse_what_they_cannot_hold(gold, tmp_path, fmt, nbest, match):
    with raises_at(tmp_path / "out", None, match):
        write_nbest(nbest, tmp_path / "out", fmt, gold=gold)
    assert not (tmp_path / "out").exists()


def test_staple_writer_needs_gold(tmp_path):
    with pytest.raises(InputError, match="needs the gold"):
        write_nbest({"p1": [Hyp("a")]}, tmp_path / "out", "staple")


def test_json_writers_emit_strict_json(tmp_path, gold, capsys):
    with pytest.raises(InputError, match="prompt 'p1', rank 2: score -inf cannot be written to a JSON file; write tsv"):
        write_nbest({"p1": [Hyp("a", -1.0), Hyp("b", -math.inf)]}, tmp_path / "n.jsonl", "jsonl")
    assert not (tmp_path / "n.jsonl").exists()
    with pytest.raises(InputError, match="score nan cannot be written to a TSV file"):
        write_nbest({"p1": [Hyp("a", math.nan)]}, tmp_path / "n.tsv", "tsv")
    save_nbest({"p1": [Hyp("a")]}, tmp_path, "run", record={"map": math.nan, "by_worker": [{"map": math.inf}]})
    assert strict_json((tmp_path / "run.json").read_text()) == {"nbest": "run.tsv", "map": None,
                                                               "by_worker": [{"map": None}]}
    assert json_text({"a": [math.nan, -math.inf, 1.5]}) == '{"a": [null, null, 1.5]}'
    warn_not_finite("score", "--json", [{"id": "p1", "map": 0.5, "wf1": math.nan}])
    assert "--json: 1 row(s) hold nan or infinite values, written as null (first: wf1 = nan)" in capsys.readouterr().err


# ---------------------------------------------------------------- real data

def test_real_en_pt(staple_dir):
    gold = read_gold(staple_dir / "dev.en_pt.2020-02-20.gold.txt")
    assert len(gold) == 500
    assert sum(len(p.translations) for p in gold) == 60294
    baseline = staple_dir / "dev.en_pt.aws_baseline.pred.txt"
    assert detect_format(baseline) == "staple"
    nbest = read_nbest(baseline, gold)
    assert list(nbest) == gold.ids()
    assert all(len(hyps) == 1 and hyps[0].score is None for hyps in nbest.values())


# ---------------------------------------------------------------- TREC export

def test_write_trec_layout(gold, tmp_path):
    nbest = {"p1": [Hyp("Bem, o que o treinador disse?"), Hyp("nada"), Hyp("bem o que o treinador disse")],
             "p2": []}
    write_trec(gold, nbest, tmp_path / "r.run", tmp_path / "r.qrels")
    key = docno(norm("bem, o que o treinador disse?"))
    assert (tmp_path / "r.run").read_text().splitlines() == [
        f"p1 Q0 {key} 1 2 nbest-eval", f"p1 Q0 {docno('nada')} 2 1 nbest-eval"]
    assert (tmp_path / "r.qrels").read_text().splitlines() == [
        f"p1 0 {key} 1", f"p1 0 {docno(norm('o treinador | a treinador disse'))} 1", f"p2 0 {docno('olá')} 1",
        f"p2 0 {docno('oi')} 1"]


@pytest.mark.parametrize("seed", range(10))
def test_trec_export_matches_map(tmp_path, seed):
    gold, nbest = random_case(seed)
    rng = random.Random(seed)
    for hyps in nbest.values():  # duplicate keys further down the list
        hyps.extend(rng.sample(hyps, k=min(2, len(hyps))))
    write_trec(gold, nbest, tmp_path / "r.run", tmp_path / "r.qrels")
    with open(tmp_path / "r.qrels") as qrels_file, open(tmp_path / "r.run") as run_file:
        qrels, run = pytrec_eval.parse_qrel(qrels_file), pytrec_eval.parse_run(run_file)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    trec_map = sum(v["map"] for v in per_query.values()) / len(qrels)  # trec_eval -c
    assert trec_map == pytest.approx(Scorer(["map"]).score(gold, nbest).values["map"], abs=1e-9)


def test_write_trec_checks(gold, tmp_path):
    with pytest.raises(InputError, match="not in the gold"):
        write_trec(gold, {"p9": [Hyp("a")]}, tmp_path / "r.run", tmp_path / "r.qrels")
    qrels = write(tmp_path, "r.qrels", "keep me")
    with raises_at(qrels, None, "already exists"):
        write_trec(gold, {"p1": [Hyp("a")]}, tmp_path / "r.run", qrels)
    assert not (tmp_path / "r.run").exists()  # all or nothing


# convert --to trec says what it wrote: the run holds each list's distinct keys, so fewer lines than
# hypotheses where a list repeats a key after normalization

def test_the_run_lines_written_are_reported(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p1|x\na|0.5\nb|0.5\n\np2|y\nc|1.0\n\n", encoding="utf-8")
    nbest = tmp_path / "n.tsv"
    # p1: a, "A!" (a again after normalization), z; p2: c, c -> 5 hypotheses, 3 distinct keys ranked
    nbest.write_text("p1\t1\t-1\ta\np1\t2\t-2\tA!\np1\t3\t-3\tz\np2\t1\t-1\tc\np2\t2\t-2\tc\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["convert", "--gold", str(gold), "--nbest", str(nbest), "--to", "trec", str(out)]) == 0
    err = capsys.readouterr().err
    assert len((tmp_path / "out.run").read_text().splitlines()) == 3
    assert len((tmp_path / "out.qrels").read_text().splitlines()) == 3
    assert (f"2 prompts, 5 hypotheses -> {out}.run: 3 distinct hypotheses (2 repeating a key of their list after "
            f"normalization left out: a run ranks each document once); {out}.qrels: 3 valid translations") in err


def test_a_run_without_repeats_says_none_left_out(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p1|x\na|1.0\n\n", encoding="utf-8")
    nbest = tmp_path / "n.tsv"
    nbest.write_text("p1\t1\t-1\ta\n", encoding="utf-8")
    assert main(["convert", "--gold", str(gold), "--nbest", str(nbest), "--to", "trec", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "1 prompt, 1 hypothesis ->" in err and ": 1 distinct hypothesis; " in err and "left out" not in err


# ---------------------------------------------------------------- convert command

def test_convert_command(gold, tmp_path, capsys):
    nbest = write(tmp_path, "gen.out", fairseq_output(with_detok=True))
    gold_path, out = str(tmp_path / "gold.txt"), tmp_path / "n.tsv"
    assert main(["convert", "--gold", gold_path, "--nbest", str(nbest), "--to", "tsv", str(out)]) == 0
    assert read_nbest(out, gold) == read_nbest(nbest, gold)
    assert "2 prompts, 3 hypotheses" in capsys.readouterr().err

    assert main(["convert", "--gold", gold_path, "--nbest", str(out), "--to", "trec", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r.run").read_text().count("\n") == 3

    out.write_text("keep me")
    assert main(["convert", "--gold", gold_path, "--nbest", str(nbest), "--format", "fairseq",
                 "--to", "jsonl", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: " in err and "already exists" in err
    assert out.read_text() == "keep me"
    assert main(["convert", "--gold", gold_path, "--nbest", str(nbest), "--to", "jsonl", str(out), "--force"]) == 0
    assert read_nbest(out, gold, "jsonl") == read_nbest(nbest, gold)


def test_odd_but_valid_values_are_read_as_they_are(tmp_path):
    """A prompt text that float() would parse ('Nan'), a JSON integer too large for a float, and
    "scores": null (no scores)."""
    gold_file = write(tmp_path, "gold.txt", "p1|Nan\nnão|1\n")
    gold = read_gold(gold_file)
    assert gold["p1"].text == "Nan"
    huge = write(tmp_path, "huge.jsonl", '{"id": "p1", "hyps": ["a"], "scores": [1' + "0" * 400 + ']}\n')
    with raises_at(huge, 1, "'scores' is not a list of numbers"):
        read_nbest(huge, gold)
    null = write(tmp_path, "null.jsonl", '{"id": "p1", "hyps": ["a"], "scores": null}\n')
    assert read_nbest(null, gold) == {"p1": [Hyp("a", None)]}


def test_fairseq_sample_repeated_after_others_is_an_error(gold, tmp_path):
    text = "H-0\t-1.0\tola\nH-1\t-1.0\toi\nH-0\t-2.0\tolá\n"
    path = write(tmp_path, "gen.out", text)
    with raises_at(path, 3, "appears again"):
        read_nbest(path, gold, "fairseq")


def test_unused_stem_never_picks_a_taken_name(tmp_path):
    from nbest_eval.files.output import unused_stem
    base = str(tmp_path / "valid.epoch1")
    assert unused_stem(base, (".tsv", ".json"), ".") == base
    (tmp_path / "valid.epoch1.json").write_text("{}")
    (tmp_path / "valid.epoch1.2.tsv").write_text("")
    assert unused_stem(base, (".tsv", ".json"), ".") == base + ".3"
    assert unused_stem(base, (".tsv",), "-") == base
