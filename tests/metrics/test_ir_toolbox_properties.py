"""Properties of the IR toolbox measures (iprec, ipr11, F/E, counts, user-oriented): shard
additivity, bounds, copies never add credit, and intervals and paired tests work on them."""

import random

import pytest
from cases import random_case
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Hyp, Scorer
from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

RATIOS = ["iprec0.0", "iprec0.3", "iprec0.7", "iprec1.0", "ipr11", "f2", "f0.5", "e2", "e0.25",
          "coverage", "novelty", "relative_recall", "recall_effect"]
COUNTS = ["num_ret", "num_rel", "num_rel_ret"]
SCORER = Scorer(RATIOS + COUNTS)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), shards=st.integers(1, 5))
def test_scoring_in_shards_and_adding_equals_scoring_whole(seed, shards):
    gold, nbest = random_case(seed, n_prompts=15)
    whole = SCORER.score(gold, nbest)
    rng = random.Random(seed)
    parts = [SCORER.zero() for _ in range(shards)]
    for prompt in gold:
        i = rng.randrange(shards)
        parts[i] = parts[i] + SCORER.prompt_stats(prompt, nbest.get(prompt.id, []))
    summed = sum(parts)
    for name in SCORER.stat_names:
        assert summed[name] == pytest.approx(whole.stats[name], abs=1e-9), name
    for key, value in SCORER.values(summed).items():
        assert value == pytest.approx(whole.values[key], abs=1e-9), key


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_ratios_lie_in_the_unit_interval_and_counts_are_whole(seed):
    gold, nbest = random_case(seed, n_prompts=8)
    for prompt in gold:
        values = SCORER.values(SCORER.prompt_stats(prompt, nbest.get(prompt.id, [])))
        for key in RATIOS:
            assert values[key] is None or 0.0 <= values[key] <= 1.0 + 1e-12, (key, values[key])
        assert all(values[key] == int(values[key]) >= 0 for key in COUNTS)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), data=st.data())
def test_copies_that_normalize_alike_never_add_credit(seed, data):
    gold, nbest = random_case(seed, n_prompts=6, nil_prompts=False)
    for prompt in gold:
        hyps = nbest.get(prompt.id, [])
        if not hyps:
            continue
        i = data.draw(st.integers(0, len(hyps) - 1))
        j = data.draw(st.integers(i + 1, len(hyps)))
        with_copy = hyps[:j] + [Hyp(hyps[i].text.upper() + "!", hyps[i].score)] + hyps[j:]
        assert SCORER.values(SCORER.prompt_stats(prompt, with_copy)) == \
            SCORER.values(SCORER.prompt_stats(prompt, hyps))


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
