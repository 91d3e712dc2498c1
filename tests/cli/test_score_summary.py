"""`score` always shows trec_eval's summary statistics (num_q, num_ret, num_rel, num_rel_ret) beside
n_prompts, as integers, in the table and in --json; a count asked for with --metrics is an integer too,
and the counts stay out of the signatures and the per-prompt rows unless asked for."""

import json
import re

import pytest
import pytrec_eval
from cases import random_case, trec_inputs

from nbest_eval import Gold, GoldPrompt, Hyp
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest

SUMMARY = ["n_prompts", "num_q", "num_ret", "num_rel", "num_rel_ret"]


def score(capsys, tmp, *options):
    assert main(["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "nbest.tsv"), *options]) == 0
    return capsys.readouterr().out


@pytest.fixture
def hand_made(tmp_path):
    """a: R = 3, its list finds o (twice: copies count once) and q among 3 distinct hypotheses; nil: no
    valid translation (left out, as MAP leaves it out); b: R = 1, no list; c: R = 2, finds t of 2 distinct.
    By hand: num_q 3 (a, b, c), num_ret 3 + 0 + 2 = 5, num_rel 3 + 1 + 2 = 6, num_rel_ret 2 + 0 + 1 = 3."""
    gold = Gold([GoldPrompt("a", "x", (("o", 1.0), ("p", 1.0), ("q", 1.0))), GoldPrompt("nil", "y", ()),
                 GoldPrompt("b", "z", (("r", 1.0),)), GoldPrompt("c", "w", (("s", 2.0), ("t", 1.0)))])
    nbest = {"a": [Hyp("o"), Hyp("O!"), Hyp("w"), Hyp("q")], "nil": [Hyp("w"), Hyp("v")],
             "c": [Hyp("t"), Hyp("x")]}
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "nbest.tsv", "tsv")
    return tmp_path


HAND_COUNTED = {"n_prompts": 4, "num_q": 3, "num_ret": 5, "num_rel": 6, "num_rel_ret": 3}


def test_json_has_the_hand_counted_summary_as_integers(hand_made, capsys):
    values = json.loads(score(capsys, hand_made, "--json", "--metrics", "map"))
    assert {key: values[key] for key in SUMMARY} == HAND_COUNTED
    assert all(type(values[key]) is int for key in SUMMARY)
    assert list(values["signatures"]) == ["map"]  # not asked for: no signature


def test_table_has_the_summary_block_as_integers(hand_made, capsys):
    out = score(capsys, hand_made, "--metrics", "map")
    block = out.split("\nsummary:\n")[1].split("\nsignatures:\n")[0]
    assert [line.split() for line in block.splitlines()] == [[k, str(v)] for k, v in HAND_COUNTED.items()]
    assert "num_ret" not in out.split("\nsignatures:\n")[1]


def test_a_count_asked_for_prints_as_an_integer_everywhere(hand_made, capsys):
    rows_file = hand_made / "rows.jsonl"
    out = score(capsys, hand_made, "--metrics", "map,num_rel_ret", "--per-prompt", str(rows_file))
    assert re.search(r"^num_rel_ret +3$", out, re.M), out  # not 3.0000
    assert "num_rel_ret  num_rel_ret|" in out  # asked for: signed
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [(row["id"], row["num_rel_ret"]) for row in rows] == [("a", 2), ("nil", 0), ("b", 0), ("c", 1)]
    assert all(type(row["num_rel_ret"]) is int and "num_ret" not in row for row in rows)
    values = json.loads(score(capsys, hand_made, "--json", "--metrics", "num_rel_ret"))
    assert type(values["num_rel_ret"]) is int and values["num_rel_ret"] == 3


def test_per_prompt_rows_leave_the_counts_out_unless_asked_for(hand_made, capsys):
    rows_file = hand_made / "rows.jsonl"
    score(capsys, hand_made, "--metrics", "map", "--per-prompt", str(rows_file))
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert all(set(row) == {"id", "map", "signature"} for row in rows)
    assert rows[0]["signature"].startswith("map|")


@pytest.mark.parametrize("seed", range(4))
def test_equal_to_trec_eval_s_summary(tmp_path, capsys, seed):
    """pytrec_eval's per-query num_* summed, plus what trec_eval -c adds for a prompt without a list
    (it is a query: num_q 1, num_rel R); through the --jobs workers as well as in-process."""
    gold, nbest = random_case(seed, n_prompts=40, max_hyps=20)
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "nbest.tsv", "tsv")
    qrels, run = trec_inputs(gold, nbest, graded=False)
    keys = ["num_q", "num_ret", "num_rel", "num_rel_ret"]
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(keys)).evaluate(run)
    expected = {key: round(sum(v[key] for v in per_query.values())) for key in keys}
    unlisted = [q for q in qrels if q not in run]
    expected["num_q"] += len(unlisted)
    expected["num_rel"] += sum(len(qrels[q]) for q in unlisted)
    assert unlisted or seed, "the random cases should include a prompt without a list"
    for jobs in ("1", "2"):
        values = json.loads(score(capsys, tmp_path, "--json", "--metrics", "map", "--jobs", jobs))
        assert {key: values[key] for key in keys} == expected and values["n_prompts"] == len(gold)
