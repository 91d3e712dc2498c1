"""Interpolated precision at the 11 recall levels (iprec0.0 ... iprec1.0) and the 11-point average
(ipr11): trec_eval's (pytrec_eval's) numbers with the default rule, the textbook's with ``exact``."""

import random
from fractions import Fraction

import pytest
import pytrec_eval
from cases import random_case, trec_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer

LEVELS = [f"{t / 10:.1f}" for t in range(11)]
KEYS = [f"iprec{level}" for level in LEVELS] + ["ipr11"]
TREC = {**{f"iprec{level}": f"iprec_at_recall_{level}0" for level in LEVELS}, "ipr11": "11pt_avg"}


def textbook(**rule):
    """Baeza-Yates and Ribeiro-Neto's example: {d3, d56, d129} found at ranks 3, 8 and 15 of 15."""
    prompt = GoldPrompt("q", "x", (("d3", 1.0), ("d56", 1.0), ("d129", 1.0)))
    hyps = [Hyp(f"n{i}") for i in range(1, 16)]
    hyps[2], hyps[7], hyps[14] = Hyp("d3"), Hyp("d56"), Hyp("d129")
    scorer = Scorer(KEYS, **rule)
    return scorer.values(scorer.prompt_stats(prompt, hyps))


def test_the_textbook_example_with_the_exact_rule():
    values = textbook(iprec_rule="exact")
    expected = [1 / 3] * 4 + [0.25] * 3 + [0.2] * 4
    assert [values[f"iprec{level}"] for level in LEVELS] == pytest.approx(expected, abs=1e-12)
    assert values["ipr11"] == pytest.approx(sum(expected) / 11, abs=1e-12)


def test_the_textbook_example_with_trec_eval_s_rule_gives_0_25_at_0_7():
    """0.7 * 3 + 0.9 is 2.9999999999999996 in floating point: trec_eval needs 2 valid ones, not 3."""
    values = textbook(iprec_rule="trec_eval")
    assert values["iprec0.7"] == 0.25
    assert [values[f"iprec{level}"] for level in LEVELS] == pytest.approx([1 / 3] * 4 + [0.25] * 4 + [0.2] * 3)
    assert textbook() == values  # the default rule


def evaluate_with_trec_eval(gold, nbest):
    qrels, run = trec_inputs(gold, nbest, graded=False)
    return qrels, pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall", "11pt_avg"}).evaluate(run)


def assert_equal_to_trec_eval(gold, nbest):
    qrels, expected = evaluate_with_trec_eval(gold, nbest)
    scorer = Scorer(KEYS)
    for prompt in gold:
        values = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        if prompt.id in expected:
            for key, trec_key in TREC.items():
                assert values[key] == pytest.approx(expected[prompt.id][trec_key], abs=1e-12), (prompt.id, key)
        elif prompt.id in qrels:  # R > 0, an empty list (trec_eval -c: 0)
            assert set(values.values()) == {0.0}
        else:  # R = 0: left out, as MAP leaves it out
            assert set(values.values()) == {None}
    return len(expected)


@pytest.mark.parametrize("seed", range(6))
def test_equal_to_trec_eval_on_random_lists(seed):
    gold, nbest = random_case(seed, n_prompts=30, max_valid=25, max_hyps=30)
    assert assert_equal_to_trec_eval(gold, nbest) >= 15


def lists(n_valid, rng, found_share=0.7):
    """A prompt with ``n_valid`` valid translations and a list that finds some of them among misses."""
    valid = [f"v{i}" for i in range(n_valid)]
    hits = rng.sample(valid, max(1, int(n_valid * found_share * rng.random())))
    misses = [f"x{i}" for i in range(rng.randint(0, 2 * n_valid))]
    hyps = hits + misses
    rng.shuffle(hyps)
    return valid, hyps


def test_equal_to_trec_eval_for_every_R_up_to_200():
    """Every count of valid translations from 1 to 200, at every level: where r * R + 0.9 lands just
    below an integer in floating point (r=0.7, R=3; r=0.3, R=7...), trec_eval's count is one less."""
    rng = random.Random(7)
    prompts, nbest = [], {}
    for R in range(1, 201):
        valid, hyps = lists(R, rng, found_share=1.0)
        prompts.append(GoldPrompt(f"q{R}", f"x{R}", tuple((v, 1.0) for v in valid)))
        nbest[f"q{R}"] = [Hyp(h) for h in hyps]
    assert assert_equal_to_trec_eval(prompts, nbest) == 200


@settings(max_examples=60, deadline=None)
@given(R=st.integers(1, 40), rel=st.lists(st.booleans(), max_size=60), data=st.data())
def test_equal_to_trec_eval_on_any_list(R, rel, data):
    """Any pattern of valid and invalid hypotheses, the list holding at most R valid ones, with copies."""
    valid, hyps, n_valid = [f"v{i}" for i in range(R)], [], 0
    for i, is_valid in enumerate(rel):
        if is_valid and n_valid < R:
            hyps.append(valid[n_valid])
            n_valid += 1
        else:
            hyps.append(f"x{i}")
        if data.draw(st.integers(0, 9)) == 0:
            hyps.append(hyps[data.draw(st.integers(0, len(hyps) - 1))].upper())  # a copy: dropped
    prompt = GoldPrompt("q", "x", tuple((v, 1.0) for v in valid))
    assert_equal_to_trec_eval([prompt], {"q": [Hyp(h) for h in hyps]} if hyps else {})


@settings(max_examples=60, deadline=None)
@given(R=st.integers(1, 30), rel=st.lists(st.booleans(), max_size=40))
def test_the_exact_rule_is_the_textbook_definition(R, rel):
    """The highest precision at any rank whose recall is at least the level, in exact arithmetic."""
    rel = rel[:]
    while sum(rel) > R:
        rel.remove(True)
    valid = iter(f"v{i}" for i in range(R))
    hyps = [Hyp(next(valid) if s else f"x{i}") for i, s in enumerate(rel)]
    prompt = GoldPrompt("q", "x", tuple((f"v{i}", 1.0) for i in range(R)))
    scorer = Scorer(KEYS, iprec_rule="exact")
    values = scorer.values(scorer.prompt_stats(prompt, hyps))
    for t, level in enumerate(LEVELS):
        found = [Fraction(sum(rel[:i]), i) for i in range(1, len(rel) + 1)
                 if Fraction(sum(rel[:i]), R) >= Fraction(t, 10) and sum(rel[:i]) > 0]
        assert values[f"iprec{level}"] == pytest.approx(float(max(found, default=0)), abs=1e-12), level


def test_averaged_over_prompts_with_valid_translations():
    gold = Gold([GoldPrompt("nil", "x", ()), GoldPrompt("a", "y", (("o", 1.0), ("p", 1.0))),
                 GoldPrompt("b", "z", (("q", 1.0),))])
    nbest = {"nil": [Hyp("w")], "a": [Hyp("w"), Hyp("o")], "b": []}
    scored = Scorer(["iprec0.5", "ipr11", "map"]).score(gold, nbest)
    assert scored.values["iprec0.5"] == pytest.approx((0.5 + 0.0) / 2)  # a: 1 of 2 at rank 2; b: empty
    assert scored.values["ipr11"] == pytest.approx((6 * 0.5 / 11 + 0.0) / 2)


def test_eleven_point_average_is_the_mean_of_the_levels():
    gold, nbest = random_case(3, n_prompts=25)
    values = Scorer(KEYS).score(gold, nbest).values
    assert values["ipr11"] == pytest.approx(sum(values[f"iprec{level}"] for level in LEVELS) / 11, abs=1e-12)


@pytest.mark.parametrize("key", ["iprec0.05", "iprec1.1", "iprec1", "iprec.5", "iprec0.10", "iprec"])
def test_only_the_11_standard_levels_are_keys(key):
    from nbest_eval.metrics import is_metric_key
    assert not is_metric_key(key)


def test_the_rule_is_in_the_signature_and_checked():
    from nbest_eval.signature import signature

    gold = Gold([GoldPrompt("q", "x", (("a", 1.0),))])
    assert "|rule:exact|" in signature(Scorer(["iprec0.7"], iprec_rule="exact"), gold, 1)
    assert "|rule:trec_eval|" in signature(Scorer(["ipr11"]), gold, 1)
    with pytest.raises(ValueError, match="iprec_rule must be one of trec_eval, exact"):
        Scorer(["ipr11"], iprec_rule="lround")
