"""trec_eval's summary statistics num_ret, num_rel, num_rel_ret: sums over the prompts with valid
translations (trec_eval -c's sums, from pytrec_eval's per-query values), additive, resampled as sums."""

import numpy as np
import pytest
import pytrec_eval
from cases import random_case, trec_inputs

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.metrics import higher_is_better
from nbest_eval.significance import PerPrompt, bootstrap_draws

KEYS = ["num_ret", "num_rel", "num_rel_ret"]


@pytest.mark.parametrize("seed", range(6))
def test_sums_of_trec_eval_s_per_query_counts(seed):
    gold, nbest = random_case(seed, n_prompts=30, max_hyps=20)
    qrels, run = trec_inputs(gold, nbest, graded=False)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(KEYS)).evaluate(run)
    expected = {key: sum(v[key] for v in per_query.values()) for key in KEYS}
    expected["num_rel"] += sum(len(qrels[q]) for q in qrels if q not in run)  # trec_eval -c: R of empty runs
    assert Scorer(KEYS).score(gold, nbest).values == expected


def test_hand_counted():
    """Copies count once; a nil-answer prompt is left out, as MAP leaves it out; an empty list adds R."""
    gold = Gold([GoldPrompt("a", "x", (("o", 1.0), ("p", 1.0), ("q", 1.0))), GoldPrompt("nil", "y", ()),
                 GoldPrompt("b", "z", (("r", 1.0),))])
    nbest = {"a": [Hyp("o"), Hyp("O!"), Hyp("w"), Hyp("q")], "nil": [Hyp("w"), Hyp("v")]}
    scored = Scorer(KEYS).score(gold, nbest, keep_per_prompt=True)
    assert scored.values == {"num_ret": 3, "num_rel": 4, "num_rel_ret": 2}
    assert [Scorer(KEYS).values(stats) for _, stats in scored.per_prompt] == [
        {"num_ret": 3, "num_rel": 3, "num_rel_ret": 2}, {"num_ret": 0, "num_rel": 0, "num_rel_ret": 0},
        {"num_ret": 0, "num_rel": 1, "num_rel_ret": 0}]


def test_resampled_as_sums():
    gold, nbest = random_case(2, n_prompts=20)
    scorer = Scorer(KEYS)
    rows = [(p.id, scorer.prompt_stats(p, nbest.get(p.id, []))) for p in gold]
    per_prompt = PerPrompt(scorer, rows)
    draws = bootstrap_draws(len(rows), 50, 1)
    resampled = per_prompt.resampled(draws)
    for key in KEYS:
        counts = np.array([scorer.values(stats)[key] for _, stats in rows])
        assert resampled[key].tolist() == (draws @ counts).tolist(), key
    assert per_prompt.per_prompt_values("num_ret") is None  # a sum: no per-prompt mean for a t-test


def test_counts_have_no_direction():
    assert {higher_is_better(key) for key in KEYS} == {None}
