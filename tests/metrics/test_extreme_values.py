"""Weights and scores anywhere in the float range: every metric is scale-free in the weights (and
the preference correlations in the scores), so huge finite values must give the values of small ones."""

import pytest
from cases import random_case

from nbest_eval import DEFAULT_METRICS, Gold, GoldPrompt, Hyp, Scorer

HUGE_WEIGHT = 1e307  # a dozen such weights overflow a float sum
HUGE_SCORE = 1e300  # squares overflow


def scaled(gold, nbest, weight_factor, score_factor):
    prompts = [GoldPrompt(p.id, p.text, tuple((t, w * weight_factor) for t, w in p.translations)) for p in gold]
    lists = {pid: [Hyp(h.text, h.score * score_factor) for h in hyps] for pid, hyps in nbest.items()}
    return Gold(prompts), lists


@pytest.mark.parametrize("seed", range(4))
def test_huge_weights_and_scores_give_the_values_of_small_ones(seed):
    gold, nbest = random_case(seed, integer_weights=True)
    scorer = Scorer(DEFAULT_METRICS)
    expected = scorer.score(gold, nbest).values
    actual = Scorer(DEFAULT_METRICS).score(*scaled(gold, nbest, HUGE_WEIGHT, HUGE_SCORE)).values
    for key in DEFAULT_METRICS:
        if expected[key] is None:
            assert actual[key] is None, key
        else:
            assert actual[key] == pytest.approx(expected[key], abs=1e-9), key


def test_a_perfect_list_with_huge_weights_scores_one():
    translations = tuple((f"t{i}", 1.5e308) for i in range(4))
    gold = Gold([GoldPrompt("p", "source", translations)])
    values = Scorer(["wf1", "wrecall", "ndcg10"]).score(gold, {"p": [Hyp(t) for t, _ in translations]}).values
    assert values == {"wf1": 1.0, "wrecall": 1.0, "ndcg10": 1.0}
