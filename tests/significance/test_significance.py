"""Confidence intervals and paired tests against sacrebleu's significance module, trec_eval + scipy,
and hand-computed cases (never against this code's own output)."""

import numpy as np
import pytest
import pytrec_eval
from cases import random_case, trec_inputs
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample, estimate_ci
from scipy import stats as scipy_stats

from nbest_eval import Hyp, InputError, Scorer
from nbest_eval.significance import PerPrompt, bootstrap_draws, confidence_intervals, holm, paired_test

N_PROMPTS = 120


def systems(seeds=(3, 4, 5)):
    """One gold and a system per seed, every prompt with a list (sacrebleu needs a hypothesis per segment)."""
    gold, _ = random_case(seeds[0], n_prompts=N_PROMPTS, nil_prompts=False, max_hyps=10)
    out = []
    for seed in seeds:
        _, nbest = random_case(seed, n_prompts=N_PROMPTS, nil_prompts=False, max_hyps=10)
        for i, prompt in enumerate(gold):
            # some top-1 hypotheses are the reference itself, so that systems differ in BLEU
            top = prompt.translations[0][0] if (i + seed) % 3 == 0 else None
            hyps = nbest.get(prompt.id) or [Hyp("a casa", -1.0)]
            nbest[prompt.id] = ([Hyp(top, 0.0)] if top else []) + hyps
        out.append(nbest)
    return gold, out


def sacrebleu_inputs(gold, nbest):
    """bleu_1x1's segments: each prompt's top hypothesis against its highest-weight translation."""
    refs = [sorted(p.translations, key=lambda t: -t[1])[0][0] for p in gold]
    return [nbest[p.id][0].text for p in gold], [refs]


def per_prompt(scorer, gold, nbest, name):
    return PerPrompt(scorer, scorer.score(gold, nbest, keep_per_prompt=True).per_prompt, name)


def test_bleu_1x1_interval_equals_sacrebleu_confidence():
    gold, (nbest, *_) = systems()
    scorer = Scorer(["bleu_1x1"])
    ours = confidence_intervals(per_prompt(scorer, gold, nbest, "a"))["bleu_1x1"]
    bleu = BLEU()
    hyps, refs = sacrebleu_inputs(gold, nbest)
    seed, resampled = _bootstrap_resample(bleu._extract_corpus_statistics(hyps, refs), bleu, 1000)
    assert seed == "12345"
    mean, half_width = estimate_ci(np.array([s.score for s in resampled]))
    # sacrebleu sums its resamples in float32; the counts are exact, its precisions differ below 1e-6
    assert ours.mean == pytest.approx(mean, abs=1e-5)
    assert ours.half_width == pytest.approx(half_width, abs=1e-5)


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_bleu_1x1_paired_p_values_equal_sacrebleu(test):
    gold, lists = systems()
    scorer = Scorer(["bleu_1x1", "map"])
    ours = paired_test(per_prompt(scorer, gold, lists[0], "base"),
                       [per_prompt(scorer, gold, nbest, f"s{i}") for i, nbest in enumerate(lists[1:])], test)
    named = [(f"s{i - 1}" if i else "base", sacrebleu_inputs(gold, nbest)[0]) for i, nbest in enumerate(lists)]
    _, results = PairedTest(named, {"BLEU": BLEU()}, sacrebleu_inputs(gold, lists[0])[1], test_type=test)()
    for i, name in enumerate(["s0", "s1"], 1):
        expected = results["BLEU"][i]
        assert ours[name]["bleu_1x1"].p_value == expected.p_value
        assert ours[name]["bleu_1x1"].score == pytest.approx(expected.score, abs=1e-9)
        if test == "bs":
            assert ours[name]["bleu_1x1"].interval.mean == pytest.approx(expected.mean, abs=1e-5)
            assert ours[name]["bleu_1x1"].interval.half_width == pytest.approx(expected.ci, abs=1e-5)
    assert len({r["bleu_1x1"].p_value for r in ours.values()}) == 2  # the systems do differ


def average_precisions(gold, nbest):
    """trec_eval's per-prompt AP (0 for a prompt with valid translations but no hypothesis)."""
    qrels, run = trec_inputs(gold, nbest, graded=False)
    found = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    return np.array([found.get(p.id, {"map": 0.0})["map"] for p in gold if p.id in qrels])


def test_map_interval_is_the_bootstrap_of_trec_eval_average_precisions():
    gold, nbest = random_case(11, n_prompts=80)  # nil-answer prompts too: MAP averages over the others
    scorer = Scorer(["map"])
    ours = confidence_intervals(per_prompt(scorer, gold, nbest, "a"), n_samples=400, seed=7)["map"]
    ap = {p.id: v for p, v in zip([p for p in gold if p.translations], average_precisions(gold, nbest))}
    draws = np.random.default_rng(7).choice(len(gold), (400, len(gold)))
    scores = []
    for row in draws:
        drawn = [ap[gold.prompts[i].id] for i in row if gold.prompts[i].id in ap]
        scores.append(sum(drawn) / len(drawn))
    mean, half_width = estimate_ci(np.array(scores))
    assert (ours.mean, ours.half_width) == pytest.approx((mean, half_width), abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx((sorted(scores)[10], sorted(scores)[389]), abs=1e-12)


def test_paired_t_on_average_precision_equals_scipy_ttest_rel():
    gold, lists = systems()
    scorer = Scorer(["map", "bleu_100x100"])
    result = paired_test(per_prompt(scorer, gold, lists[0], "base"), [per_prompt(scorer, gold, lists[1], "s")], "t")
    expected = scipy_stats.ttest_rel(average_precisions(gold, lists[1]), average_precisions(gold, lists[0]))
    assert result["s"]["map"].p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert result["s"]["bleu_100x100"].p_value is None  # BLEU is no mean of per-prompt values


def test_holm_by_hand():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, None, 0.9]) == [pytest.approx(1.0), None, pytest.approx(1.0)]
    assert holm([]) == []


def test_holm_applies_across_the_systems_of_one_measure():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "base")
    others = [per_prompt(scorer, gold, nbest, f"s{i}") for i, nbest in enumerate(lists[1:])]
    result = paired_test(base, others, "bs")
    raw = [result[s.name]["map"].p_value for s in others]
    assert [result[s.name]["map"].p_holm for s in others] == pytest.approx(
        [min(1.0, 2 * min(raw)) if p == min(raw) else max(min(1.0, 2 * min(raw)), p) for p in raw])


def test_bootstrap_draws_count_sacrebleus_indices():
    draws = bootstrap_draws(7, 5, seed=3)
    indices = np.random.default_rng(3).choice(7, size=(5, 7), replace=True)
    assert draws.tolist() == [np.bincount(row, minlength=7).tolist() for row in indices]


def test_systems_over_different_prompts_cannot_be_paired():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "base")
    rows = scorer.score(gold, lists[1], keep_per_prompt=True).per_prompt
    with pytest.raises(InputError, match=r"short cannot be paired with base: 1 of base's prompts are missing "
                                         r"\(the first: prompt_0\)"):
        paired_test(base, [PerPrompt(scorer, rows[1:], "short")])
    with pytest.raises(InputError, match="another order"):
        paired_test(base, [PerPrompt(scorer, rows[::-1], "reversed")])
    with pytest.raises(InputError, match="unknown paired test 'z'"):
        paired_test(base, [base], "z")


def test_identical_systems_are_never_significant():
    """sacrebleu's strict count gives them p = 1 / (N + 1); no difference is no evidence: p = 1."""
    gold, lists = systems()
    scorer = Scorer(["map", "bleu_1x1"])
    base = per_prompt(scorer, gold, lists[0], "base")
    for test in ("bs", "ar"):
        result = paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], test, n_samples=200)
        assert [r.p_value for r in result["same"].values()] == [1.0, 1.0]
    assert paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], "t")["same"]["map"].p_value == 1.0


def test_api_confidence_equals_sacrebleu_and_signs_its_scores():
    import nbest_eval

    gold, (nbest, *_) = systems()
    result = nbest_eval.score(gold, nbest, metrics="bleu_1x1,map", confidence=True, n_samples=500, seed=9)
    bleu = BLEU()
    hyps, refs = sacrebleu_inputs(gold, nbest)
    stats = np.array(bleu._extract_corpus_statistics(hyps, refs), dtype=float)
    draws = np.random.default_rng(9).choice(len(gold), size=(500, len(gold)), replace=True)
    mean, half_width = estimate_ci(np.array([bleu._compute_score_from_stats(list(stats[row].sum(0))).score
                                             for row in draws]))
    found = result.intervals["bleu_1x1"]
    assert (found.mean, found.half_width) == pytest.approx((mean, half_width), abs=1e-9)
    assert result.signatures["map"].startswith(f"map|nbest:{max(len(h) for h in nbest.values())}|gold:120p.")
    assert "|bs:500|seed:9|" in result.signatures["map"]
    assert not nbest_eval.score(gold, nbest, metrics="map").intervals  # only when asked


def test_systems_need_distinct_names():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "run")
    with pytest.raises(InputError, match="two systems are named 'run'"):
        paired_test(base, [per_prompt(scorer, gold, lists[1], "run")])


def test_identical_systems_under_the_t_test_get_p_one_and_bleu_refuses_it_for_selection():
    from nbest_eval.selection import judge_against_best

    gold, lists = systems()
    scorer = Scorer(["map", "bleu_1x1"])
    base = per_prompt(scorer, gold, lists[0], "base")
    assert paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], "t")["same"]["map"].p_value == 1.0
    with pytest.raises(InputError, match="bleu_1x1 is no mean over prompts"):
        judge_against_best([base, per_prompt(scorer, gold, lists[1], "other")], 0, "bleu_1x1", "t")
