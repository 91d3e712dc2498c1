"""Property tests over every registered metric (a patterned one through two of its keys): scores of
shards add up to the whole, values lie in bounds, copies never add credit, and intervals and paired
tests work on them. Registering a metric puts it under them; the last test shows that a metric whose
statistics are not additive is caught."""

import itertools
import random
import re

import pytest
from cases import pattern_keys, random_case
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Hyp, Scorer
from nbest_eval.metrics import N_PROMPTS, Metric, registry
from nbest_eval.metrics.base import N_EMPTY, N_REL
from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

#: bounds of a per-prompt value other than [0, 1], by pattern; a count (higher_is_better None) is a whole number
RANGES = {"pref_spearman": (-1.0, 1.0), "pref_pearson": (-1.0, 1.0), "bleu_{x}x{y}": (0.0, 100.0)}
#: patterns whose values a copy of a hypothesis may change, and why (docs/metrics.md)
COPIES_COUNT = {"bleu_{x}x{y}": "its top x hypotheses are segments as written: no normalization, no deduplication"}


def registered(patterns=None) -> dict:
    """{key: its spec} for every registered metric (read at call time: a metric registered later is in),
    a patterned one as the first and last of cases.pattern_keys."""
    specs = [spec for spec in registry.REGISTRY if patterns is None or spec.pattern in patterns]
    return {key: spec for spec in specs for key in representatives(spec)}


def representatives(spec) -> list:
    keys = pattern_keys(spec)
    return list(dict.fromkeys([keys[0], keys[-1]]))


def exact(name: str) -> bool:
    """Statistics that are integer counts, compared exactly."""
    return name.startswith("bleu") or name in (N_PROMPTS, N_REL, N_EMPTY) or name.endswith(":n")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), shards=st.integers(1, 6))
def test_scoring_in_shards_and_adding_equals_scoring_whole(seed, shards):
    """As the workers score: each shard by a scorer of its own; the sums are the whole file's."""
    keys = list(registered())
    gold, nbest = random_case(seed, n_prompts=15)
    whole = Scorer(keys).score(gold, nbest)
    rng = random.Random(seed)
    scorers = [Scorer(keys) for _ in range(shards)]
    parts = [scorer.zero() for scorer in scorers]
    for prompt in gold:
        i = rng.randrange(shards)  # uneven, possibly empty shards
        parts[i] = parts[i] + scorers[i].prompt_stats(prompt, nbest.get(prompt.id, []))
    summed = sum(parts)
    for name in whole.stats:
        if exact(name):
            assert summed[name] == whole.stats[name], name
        else:
            assert summed[name] == pytest.approx(whole.stats[name], abs=1e-9), name
    values = scorers[0].values(summed)
    for key, value in whole.values.items():
        assert (value is None and values[key] is None) or values[key] == pytest.approx(value, abs=1e-9), key


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_values_lie_in_bounds_and_counts_are_whole(seed):
    specs = registered()
    gold, nbest = random_case(seed, n_prompts=8)
    scorer = Scorer(list(specs))
    for prompt in gold:
        values = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        for key, spec in specs.items():
            if spec.higher_is_better is None:
                assert values[key] == int(values[key]) >= 0, (key, values[key])
            else:
                low, high = RANGES.get(spec.pattern, (0.0, 1.0))
                assert values[key] is None or low - 1e-12 <= values[key] <= high + 1e-12, (key, values[key])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), data=st.data())
def test_copies_that_normalize_alike_never_add_credit(seed, data):
    keys = [key for key, spec in registered().items() if spec.pattern not in COPIES_COUNT]
    gold, nbest = random_case(seed, n_prompts=6, nil_prompts=False)
    scorer = Scorer(keys)
    for prompt in gold:
        hyps = nbest.get(prompt.id, [])
        if not hyps:
            continue
        i = data.draw(st.integers(0, len(hyps) - 1))
        j = data.draw(st.integers(i + 1, len(hyps)))
        copy = Hyp(hyps[i].text.upper() + "!", hyps[i].score)
        with_copy = hyps[:j] + [copy] + hyps[j:]
        assert scorer.values(scorer.prompt_stats(prompt, with_copy)) == \
            scorer.values(scorer.prompt_stats(prompt, hyps))


@pytest.fixture(scope="module")
def two_systems():
    """Two systems' per-prompt statistics on one random gold, every registered measure: the second
    system's lists are the first's reordered and shorter."""
    scorer = Scorer(list(registered()))
    gold, first = random_case(8, n_prompts=40, nil_prompts=False)
    second = {pid: hyps[::-1][: 2 * len(hyps) // 3] for pid, hyps in first.items()}
    rows = [[(p.id, scorer.prompt_stats(p, nbest.get(p.id, []))) for p in gold] for nbest in (first, second)]
    return PerPrompt(scorer, rows[0], "a"), PerPrompt(scorer, rows[1], "b")


def test_intervals_hold_the_value(two_systems):
    intervals = confidence_intervals(two_systems[0], 200, 3)
    scores = two_systems[0].scores()
    for key in registered():
        assert intervals[key].low <= scores[key] <= intervals[key].high, key


@pytest.mark.parametrize("test", ["bs", "ar", "t"])
def test_paired_tests_give_a_p_value(two_systems, test):
    """A t-test needs per-prompt means: a sum (the counts) or a corpus statistic (BLEU) has none."""
    results = paired_test(two_systems[0], [two_systems[1]], test, n_samples=200, seed=3)["b"]
    no_mean = {metric.key for metric in two_systems[0].scorer.metrics if metric.mean_of is None}
    assert {"num_ret", "bleu_2x2"} <= no_mean
    for key in registered():
        if test == "t" and key in no_mean:
            assert results[key].p_value is None, key
        else:
            assert results[key].p_value is not None and 0 < results[key].p_value <= 1, key


def test_a_patterned_metric_is_checked_through_two_of_its_keys():
    keys = registered({"p{k}", "bleu_{x}x{y}", "map"})
    assert list(keys) == ["map", "p2", "p3", "bleu_2x2", "bleu_allxall"]


class Discounted(Metric):
    """A prompt's statistic is 1 / the number of prompts this metric has scored: it depends on the
    prompts scored before it, so shards scored apart do not add up to the whole."""

    key, stat_names, mean_of = "discounted", ("discounted",), ("discounted", N_PROMPTS)

    def __init__(self):
        self.scored = itertools.count(1)

    def prompt_stats(self, judged):
        return {"discounted": 1 / next(self.scored)}


def test_a_registered_metric_whose_statistics_do_not_add_up_is_caught(monkeypatch):
    spec = registry.MetricSpec("discounted", re.compile("discounted"), "", lambda match, options: Discounted())
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY + [spec])
    assert "discounted" in registered()
    with pytest.raises(AssertionError, match="discounted"):
        test_scoring_in_shards_and_adding_equals_scoring_whole()
