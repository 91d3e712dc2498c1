"""The user-oriented measures (coverage, novelty, relative_recall, recall_effect) on hand-computed
cases, and at the ends of "known" where they become measures checked against trec_eval elsewhere.
What is known: the top 3 unless --known-top or --known-threshold says otherwise (never both, whatever
their values), the threshold a share of the prompt's distinct keys' weight."""

import argparse
import re
from pathlib import Path

import pytest
from cases import random_case

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.cli.common import add_scorer_arguments
from nbest_eval.metrics.user import known
from nbest_eval.prompt import PromptGold
from nbest_eval.signature import signature

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"

KEYS = ["coverage", "novelty", "relative_recall", "recall_effect"]
#: weights 8, 4, 4, 2, 1, 1 of 20: known top 3 is {a, b, c} (b and c tie), top 2 {a, b} (the file's order)
PROMPT = GoldPrompt("p", "x", (("a", 8.0), ("b", 4.0), ("c", 4.0), ("d", 2.0), ("e", 1.0), ("f", 1.0)))
#: deduplicated: d z a e y b, valid at ranks 1, 3, 4 and 6
HYPS = [Hyp("d", -1.0), Hyp("z", -2.0), Hyp("a", -3.0), Hyp("D!", -3.5), Hyp("e", -4.0), Hyp("y", -5.0),
        Hyp("b", -6.0)]


def values(hyps=HYPS, prompt=PROMPT, **options):
    scorer = Scorer(KEYS, **options)
    return scorer.values(scorer.prompt_stats(prompt, hyps))


@pytest.mark.parametrize("options, expected", [
    # U = {a, b, c}: found a, b; valid found d, a, e, b (d, e not known); the 3rd valid one at rank 4
    ({}, {"coverage": 2 / 3, "novelty": 2 / 4, "relative_recall": 1.0, "recall_effect": 3 / 4}),
    # U = {a, b}: both found; the 2nd valid one at rank 3
    ({"known_top": 2}, {"coverage": 1.0, "novelty": 2 / 4, "relative_recall": 1.0, "recall_effect": 2 / 3}),
    # at least 20% of the weight: 8/20, 4/20, 4/20 -> {a, b, c}, as top 3
    ({"known_threshold": 0.2}, {"coverage": 2 / 3, "novelty": 2 / 4, "relative_recall": 1.0,
                                "recall_effect": 3 / 4}),
    # at least 25%: {a}; the 1st valid one at rank 1
    ({"known_threshold": 0.25}, {"coverage": 1.0, "novelty": 3 / 4, "relative_recall": 1.0, "recall_effect": 1.0}),
    # the list cut to d z a: found a of {a, b, c}; valid d, a (d not known); 2 of 3 valid ones, never 3
    ({"wf1_top": 3}, {"coverage": 1 / 3, "novelty": 1 / 2, "relative_recall": 2 / 3, "recall_effect": 0.0}),
    # probability at least 0.1 of the top one's, scores >= -1 + ln 0.1 = -3.30: d z a
    ({"wf1_threshold": 0.1}, {"coverage": 1 / 3, "novelty": 1 / 2, "relative_recall": 2 / 3, "recall_effect": 0.0}),
])
def test_hand_computed(options, expected):
    assert values(**options) == pytest.approx(expected, abs=1e-12)


def test_where_undefined_a_prompt_is_left_out_and_counted():
    gold = Gold([PROMPT, GoldPrompt("nil", "y", ()), GoldPrompt("miss", "z", (("o", 1.0),))])
    nbest = {"p": HYPS, "nil": [Hyp("w")], "miss": [Hyp("w")]}
    scorer = Scorer(KEYS)
    scored = scorer.score(gold, nbest)
    # nil: nothing known, nothing valid found -> left out of all four; miss: U = {o}, nothing found
    assert scored.values == pytest.approx({"coverage": (2 / 3 + 0) / 2, "novelty": 2 / 4,
                                           "relative_recall": (1 + 0) / 2, "recall_effect": (3 / 4 + 0) / 2})
    assert scorer.counted(scored.stats) == {"coverage": 2, "novelty": 1, "relative_recall": 2, "recall_effect": 2}


def test_a_threshold_above_every_share_leaves_nothing_known():
    assert values(known_threshold=0.5) == {"coverage": None, "novelty": 1.0, "relative_recall": None,
                                           "recall_effect": None}


@pytest.mark.parametrize("seed", range(4))
def test_knowing_every_valid_translation_gives_recall_and_precision_at_full_recall(seed):
    """U = V: coverage and relative recall are the F1 family's recall, the recall effort is the
    precision where the list first holds every valid translation (iprec1.0), novelty 0."""
    gold, nbest = random_case(seed, n_prompts=25, nil_prompts=False)
    scorer = Scorer(KEYS + ["recall", "iprec1.0"], known_top=1000)
    for prompt in gold:
        v = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        assert v["coverage"] == v["relative_recall"] == pytest.approx(v["recall"], abs=1e-12)
        assert v["recall_effect"] == pytest.approx(v["iprec1.0"], abs=1e-12)
        assert v["novelty"] in (0.0, None)


@pytest.mark.parametrize("seed", range(4))
def test_knowing_one_translation_gives_the_reciprocal_rank(seed):
    """|U| = 1: the recall effort is 1 / the rank of the first valid hypothesis (rr); relative recall
    is whether there is one."""
    gold, nbest = random_case(seed, n_prompts=25, nil_prompts=False)
    scorer = Scorer(KEYS + ["rr"], known_top=1)
    for prompt in gold:
        v = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        assert v["recall_effect"] == pytest.approx(v["rr"], abs=1e-12)
        assert v["relative_recall"] == (1.0 if v["rr"] > 0 else 0.0)


def test_weights_near_the_float_maximum():
    huge = GoldPrompt("p", "x", tuple((t, w * 1e307) for t, w in PROMPT.translations))
    assert values(prompt=huge, known_threshold=0.2) == pytest.approx(values(known_threshold=0.2))


def test_signed_with_what_is_known_and_the_truncation():
    gold = Gold([PROMPT])
    assert signature(Scorer(["novelty"]), gold, 7).startswith("novelty|known:top3|trunc:none|")
    assert signature(Scorer(["coverage"], known_threshold=0.05, wf1_top=5), gold, 7).startswith(
        "coverage|known:thr0.05|trunc:top5|")


@pytest.mark.parametrize("options, message", [({"known_top": 0}, "known_top must be >= 1"),
                                              ({"known_threshold": 0.0}, "known_threshold must be in"),
                                              ({"known_threshold": 1.5}, "known_threshold must be in"),
                                              ({"known_top": 2, "known_threshold": 0.1},
                                               "at most one of known_top and known_threshold")])
def test_options_are_checked(options, message):
    with pytest.raises(ValueError, match=message):
        Scorer(["coverage"], **options)


def test_the_two_known_options_exclude_each_other_on_the_command_line(capsys):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--known-top", "2", "--known-threshold", "0.1"])
    assert "not allowed with argument" in capsys.readouterr().err


# -- what is known: --known-top or --known-threshold, never both -----------------------------------------

#: weights 5, 3, 1, 1: the top 3 is {a, b, c}, at 40% and more only {a}; the list finds a and c
KNOWN_PROMPT = GoldPrompt("p", "x", (("a", 5.0), ("b", 3.0), ("c", 1.0), ("d", 1.0)))
KNOWN_HYPS = [Hyp("a"), Hyp("c")]

BOTH = [(3, 0.4), (3, 0.1), (1, 0.1), (2, 1.0)]


def coverage(**options):
    return values(KNOWN_HYPS, KNOWN_PROMPT, **options)["coverage"]


@pytest.mark.parametrize("top, threshold", BOTH)
def test_the_scorer_refuses_both_whatever_their_values(top, threshold):
    with pytest.raises(InputError, match="at most one of known_top and known_threshold"):
        Scorer(["coverage"], known_top=top, known_threshold=threshold)


@pytest.mark.parametrize("recorded", [False, True])  # score's options, and select's (default: the run's)
@pytest.mark.parametrize("top, threshold", BOTH)
def test_the_command_line_refuses_both_whatever_their_values(capsys, recorded, top, threshold):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser, recorded=recorded)
    with pytest.raises(SystemExit):
        parser.parse_args(["--known-top", str(top), "--known-threshold", str(threshold)])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_fairseq_task_refuses_both():
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    from nbest_eval.fairseq.scorer_options import scorer_options
    from nbest_eval.fairseq.task import TranslationNBestConfig

    parser = argparse.ArgumentParser()
    gen_parser_from_dataclass(parser, TranslationNBestConfig())
    args = parser.parse_args(["DATA", "--nbest-known-top", "3", "--nbest-known-threshold", "0.4"])
    with pytest.raises(InputError, match="at most one of known_top and known_threshold"):
        Scorer(["map"], **scorer_options(args))


def test_neither_given_is_the_top_3():
    """By hand: the top 3 {a, b, c}, of which the list has a and c; at 40% of the weight {a}, found."""
    assert coverage() == coverage(known_top=3) == pytest.approx(2 / 3)
    assert coverage(known_threshold=0.4) == 1.0
    assert Scorer(["coverage"]).metrics[0].options["known"] == "top3"


def test_score_on_the_command_line_says_top_3_by_default(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p|x\na|0.5\nb|0.3\nc|0.1\nd|0.1\n\n", encoding="utf-8")
    nbest = tmp_path / "nbest.tsv"
    nbest.write_text("p\t1\t-1\ta\np\t2\t-2\tc\n", encoding="utf-8")
    assert main(["score", "--gold", str(gold), "--nbest", str(nbest), "--metrics", "coverage"]) == 0
    out = capsys.readouterr().out
    assert "coverage|known:top3|" in out and "0.6667" in out


def test_the_threshold_is_a_share_of_the_distinct_keys_weight():
    """'a wifi' and 'a wi-fi' are one key (the hyphen is punctuation) of weight 0.3: the keys weigh
    0.3 + 0.2 + 0.2 = 0.7, so its share is 3/7 ~ 0.43 (0.3 of the file's 1.0)."""
    prompt = GoldPrompt("p", "x", (("a wifi", 0.3), ("a wi-fi", 0.3), ("b", 0.2), ("c", 0.2)))
    assert known(PromptGold(prompt), None, 0.4) == {"a wifi"}
    assert known(PromptGold(prompt), None, 0.44) == set()
    scorer = Scorer(["coverage"], known_threshold=0.4)
    assert scorer.values(scorer.prompt_stats(prompt, [Hyp("A WIFI!")]))["coverage"] == 1.0


def test_the_documented_counts_of_prompts_with_nothing_known_are_measured(en_pt_gold):
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    found = re.search(r"at 0\.05, (\d+) of the 500 prompts have no known translation, at 0\.1, (\d+)", text)
    assert found, "docs/metrics.md no longer states the counts at 0.05 and 0.1"
    measured = [sum(not known(PromptGold(p), None, tau) for p in en_pt_gold) for tau in (0.05, 0.1)]
    assert [int(n) for n in found.groups()] == measured
