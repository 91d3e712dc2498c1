"""F_b and E_b (f{b}, e{b}) against trec_eval's set_F (pytrec_eval), whose parameter is b squared,
and hand-computed cases: the F1 family's set, truncation and nil-answer rule; f1 keeps its meaning."""

import pytest
import pytrec_eval
from cases import random_case, trec_inputs

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.metrics import REGISTRY, higher_is_better, is_metric_key
from nbest_eval.metrics.registry import find
from nbest_eval.signature import signature


def per_prompt(scorer, prompt, hyps):
    return scorer.values(scorer.prompt_stats(prompt, hyps))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("beta", [2.0, 0.5, 3.0, 0.25, 1.5])
def test_f_beta_equals_trec_eval_set_F_with_beta_squared(seed, beta):
    gold, nbest = random_case(seed, n_prompts=25)
    qrels, run = trec_inputs(gold, nbest, graded=False)
    expected = pytrec_eval.RelevanceEvaluator(qrels, {f"set_F.{beta * beta}", "set_P", "set_recall"}).evaluate(run)
    key = f"f{beta:g}"
    scorer = Scorer([key, f"e{beta:g}", "precision", "recall"])
    checked = 0
    for prompt in gold:
        if prompt.id in expected:
            values = per_prompt(scorer, prompt, nbest[prompt.id])
            trec = expected[prompt.id]
            assert values[key] == pytest.approx(trec["set_F"], abs=1e-12), prompt.id
            assert values[f"e{beta:g}"] == pytest.approx(1 - trec["set_F"], abs=1e-12), prompt.id
            assert (values["precision"], values["recall"]) == pytest.approx((trec["set_P"], trec["set_recall"]))
            checked += 1
    assert checked >= 8


def test_hand_computed():
    """P = 2/3, R = 1/2: F_2 = 5 PR / (4P + R) = 10/19, F_0.5 = 1.25 PR / (0.25 P + R) = 5/8."""
    prompt = GoldPrompt("p", "x", tuple((t, 1.0) for t in "abcd"))
    values = per_prompt(Scorer(["f2", "f0.5", "e2", "e0.5"]), prompt, [Hyp("a"), Hyp("z"), Hyp("B!")])
    assert values == pytest.approx({"f2": 10 / 19, "f0.5": 5 / 8, "e2": 9 / 19, "e0.5": 3 / 8}, abs=1e-12)


def test_e1_is_one_minus_f1_exactly_on_every_prompt():
    """e1 computes F_1 with the F_b formula: bit for bit the F1 family's f1."""
    gold, nbest = random_case(4, n_prompts=40)
    scorer = Scorer(["f1", "e1"])
    for prompt in gold:
        values = per_prompt(scorer, prompt, nbest.get(prompt.id, []))
        assert values["e1"] == 1.0 - values["f1"], prompt.id


@pytest.mark.parametrize("key, pattern", [("f1", "f1"), ("f2", "f{b}"), ("f0.5", "f{b}"), ("f12.25", "f{b}"),
                                          ("e1", "e{b}"), ("e0.5", "e{b}")])
def test_one_key_one_registration(key, pattern):
    assert find(key)[0].pattern == pattern
    assert sum(spec.regex.fullmatch(key) is not None for spec in REGISTRY) == 1


@pytest.mark.parametrize("key", ["f0", "e0", "f00", "f1.0", "f2.0", "f0.50", "f01", "f-1", "f.5", "fb", "e", "f1e3"])
def test_a_number_has_one_spelling_and_is_positive(key):
    assert not is_metric_key(key)


def test_the_f1_truncation_applies():
    prompt = GoldPrompt("p", "x", (("a", 1.0), ("b", 1.0)))
    hyps = [Hyp("a", -0.1), Hyp("z", -0.2), Hyp("b", -5.0)]
    full, top2 = (per_prompt(Scorer(["f2"], **options), prompt, hyps)["f2"] for options in ({}, {"wf1_top": 2}))
    assert full == pytest.approx(5 * (2 / 3) * 1 / (4 * 2 / 3 + 1))  # P 2/3, R 1
    assert top2 == pytest.approx(5 * 0.5 * 0.5 / (4 * 0.5 + 0.5))  # P 1/2, R 1/2
    by_probability = per_prompt(Scorer(["e2"], wf1_threshold=0.5), prompt, hyps)["e2"]  # keeps a, z
    assert by_probability == pytest.approx(1 - top2)


def test_signed_with_the_truncation_as_the_f1_family():
    gold = Gold([GoldPrompt("p", "x", (("a", 1.0),))])
    for options, trunc in (({}, "none"), ({"wf1_top": 3}, "top3"), ({"wf1_threshold": 0.25}, "thr0.25")):
        scorer = Scorer(["wf1", "f2", "e0.5"], **options)
        assert {signature(scorer, gold, 1, [key]).split("|")[1] for key in scorer.keys} == {f"trunc:{trunc}"}


def test_nil_answer_prompts_follow_the_f1_rule():
    """Over all prompts, as f1: a nil-answer prompt scores F 1 (E 0) for an empty list, else F 0 (E 1)."""
    nil = GoldPrompt("nil", "x", ())
    scorer = Scorer(["f2", "e2", "f1"])
    assert per_prompt(scorer, nil, []) == {"f2": 1.0, "e2": 0.0, "f1": 1.0}
    assert per_prompt(scorer, nil, [Hyp("a")]) == {"f2": 0.0, "e2": 1.0, "f1": 0.0}


def test_e_is_lower_is_better():
    assert higher_is_better("e2") is False and higher_is_better("f2") is True
