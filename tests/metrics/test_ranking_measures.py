"""Ranking measures against trec_eval (pytrec_eval) and hand-computed truncated cases."""

import math

import pytest
import pytrec_eval
from cases import random_case, trec_inputs

from nbest_eval import GoldPrompt, Hyp, Scorer

TREC = {"map": "map", "rr": "recip_rank", "p5": "P_5", "p10": "P_10", "recall5": "recall_5",
        "recall10": "recall_10", "rprec": "Rprec", "ndcg5": "ndcg_cut_5", "ndcg10": "ndcg_cut_10"}


@pytest.mark.parametrize("seed", range(8))
def test_ranking_measures_equal_trec_eval_per_prompt(seed):
    gold, nbest = random_case(seed, integer_weights=True)
    qrels, run = trec_inputs(gold, nbest, graded=True)
    expected = pytrec_eval.RelevanceEvaluator(qrels, set(TREC.values())).evaluate(run)
    scorer = Scorer(list(TREC))
    checked = 0
    for prompt in gold:
        values = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        if prompt.id in expected:
            for key, trec_key in TREC.items():
                assert values[key] == pytest.approx(expected[prompt.id][trec_key], abs=1e-9), (prompt.id, key)
            checked += 1
        elif prompt.id in qrels:  # R > 0 and an empty list: every measure is 0
            assert all(v == 0 for v in values.values())
        else:  # R = 0: undefined, left out of the mean
            assert all(v is None for v in values.values())
    assert checked >= 5


def test_map_is_mean_over_prompts_with_valid_translations():
    gold, nbest = random_case(11, n_prompts=30)
    qrels, run = trec_inputs(gold, nbest, graded=False)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    expected = sum(v["map"] for v in per_query.values()) / len(qrels)  # empty runs count 0
    assert Scorer(["map"]).score(gold, nbest).values["map"] == pytest.approx(expected, abs=1e-12)


def test_map_min_divides_by_the_shorter_of_R_and_the_list():
    prompt = GoldPrompt("p", "x", (("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)))
    values = Scorer(["map", "map_min"]).values(Scorer(["map", "map_min"]).prompt_stats(
        prompt, [Hyp("a"), Hyp("z"), Hyp("b")]))
    assert values["map"] == pytest.approx((1 + 2 / 3) / 4)
    assert values["map_min"] == pytest.approx((1 + 2 / 3) / 3)


def truncated(translations, hyps):
    scorer = Scorer(["rr_t", "rbp_t", "ndcg_t", "ap_t"])
    prompt = GoldPrompt("p", "x", tuple((t, 1.0) for t in translations))
    return scorer.values(scorer.prompt_stats(prompt, [Hyp(h) for h in hyps]))


L2, L3 = math.log2(3), 2.0  # log2(3), log2(4)


@pytest.mark.parametrize("translations, hyps, expected", [
    # R=2, [valid, invalid]: terminal gain 1/2 at rank 3
    (["a", "b"], ["a", "z"], {"rr_t": 1.0, "rbp_t": 0.5 * 1 + 0.5 * 0.25,
                              "ndcg_t": (1 + 0.5 / L3) / (1 + 1 / L2 + 1 / L3),
                              "ap_t": (1 + 0.5 * 1.5 / 3) / 3}),
    # nil-answer prompt, empty list: perfect on all four
    ([], [], {"rr_t": 1.0, "rbp_t": 1.0, "ndcg_t": 1.0, "ap_t": 1.0}),
    # nil-answer prompt, one wrong hypothesis: the terminal item (gain 1) comes at rank 2
    ([], ["z"], {"rr_t": 0.5, "rbp_t": 0.5, "ndcg_t": 1 / L2, "ap_t": 0.5}),
    # R=3, empty list: nothing found, terminal gain 0
    (["a", "b", "c"], [], {"rr_t": 0.0, "rbp_t": 0.0, "ndcg_t": 0.0, "ap_t": 0.0}),
    # R=1, [invalid, valid]: terminal gain 1 at rank 3
    (["a"], ["z", "a"], {"rr_t": 0.5, "rbp_t": 0.5 * 0.5 + 0.25,
                         "ndcg_t": (1 / L2 + 1 / L3) / (1 + 1 / L2), "ap_t": (0.5 + 2 / 3) / 2}),
])
def test_truncated_measures_on_hand_computed_cases(translations, hyps, expected):
    values = truncated(translations, hyps)
    for key, value in expected.items():
        assert values[key] == pytest.approx(value, abs=1e-12), key


def test_truncated_measures_average_over_all_prompts_including_nil_answer():
    gold = [GoldPrompt("p1", "x", ()), GoldPrompt("p2", "y", (("a", 1.0),))]
    scorer = Scorer(["ap_t", "map"])
    total = scorer.prompt_stats(gold[0], []) + scorer.prompt_stats(gold[1], [Hyp("z")])
    values = scorer.values(total)
    assert values["ap_t"] == pytest.approx((1.0 + 0.0) / 2)  # p2: r=[0], terminal 0
    assert values["map"] == 0.0  # only p2 counts


def test_graded_ndcg_uses_gold_weights_and_ideal_order():
    prompt = GoldPrompt("p", "x", (("a", 0.5), ("b", 0.3), ("c", 0.2)))
    scorer = Scorer(["ndcg2"])
    value = scorer.values(scorer.prompt_stats(prompt, [Hyp("c"), Hyp("a")]))["ndcg2"]
    assert value == pytest.approx((0.2 + 0.5 / L2) / (0.5 + 0.3 / L2))


def test_duplicates_are_dropped_and_later_ranks_move_up():
    prompt = GoldPrompt("p", "x", (("o gato", 1.0), ("a casa", 1.0)))
    scorer = Scorer(["map", "p2"])
    with_dupes = scorer.values(scorer.prompt_stats(prompt, [Hyp("O gato!"), Hyp("o gato"), Hyp("a casa")]))
    without = scorer.values(scorer.prompt_stats(prompt, [Hyp("o gato"), Hyp("a casa")]))
    assert with_dupes == without == {"map": 1.0, "p2": 1.0}
