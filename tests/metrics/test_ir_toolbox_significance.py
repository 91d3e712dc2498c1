"""Intervals and paired tests work on the IR toolbox measures (iprec, ipr11, F/E, counts,
user-oriented); their shard additivity, bounds and copies are in test_properties.py with the others."""


import pytest
from cases import random_case

from nbest_eval import Scorer
from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

RATIOS = ["iprec0.0", "iprec0.3", "iprec0.7", "iprec1.0", "ipr11", "f2", "f0.5", "e2", "e0.25",
          "coverage", "novelty", "relative_recall", "recall_effect"]
COUNTS = ["num_ret", "num_rel", "num_rel_ret"]
SCORER = Scorer(RATIOS + COUNTS)


@pytest.fixture(scope="module")
def systems():
    gold, first = random_case(8, n_prompts=40, nil_prompts=False)
    second = {pid: hyps[::-1][: 2 * len(hyps) // 3] for pid, hyps in first.items()}  # reordered, shorter
    rows = [[(p.id, SCORER.prompt_stats(p, nbest.get(p.id, []))) for p in gold] for nbest in (first, second)]
    return PerPrompt(SCORER, rows[0], "a"), PerPrompt(SCORER, rows[1], "b")


def test_intervals(systems):
    intervals = confidence_intervals(systems[0], 200, 3)
    scores = systems[0].scores()
    for key in RATIOS + COUNTS:
        assert intervals[key].low <= scores[key] <= intervals[key].high, key


@pytest.mark.parametrize("test", ["bs", "ar", "t"])
def test_paired_tests(systems, test):
    results = paired_test(systems[0], [systems[1]], test, n_samples=200, seed=3)["b"]
    for key in RATIOS:
        assert results[key].p_value is not None and 0 < results[key].p_value <= 1, key
    for key in COUNTS:  # a sum has no per-prompt mean for a t-test; resampled, it is a sum
        assert (results[key].p_value is None) is (test == "t"), key
