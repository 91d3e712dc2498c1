"""Bootstrap confidence intervals (score --confidence, the API's confidence=True) against sacrebleu's
``estimate_ci`` and draws and trec_eval's average precisions, never against this code's own output."""

import re

import numpy as np
import pytest
from cases import random_case
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import _bootstrap_resample, estimate_ci
from significance_cases import average_precisions, per_prompt, sacrebleu_inputs, systems

from nbest_eval import InputError, Scorer
from nbest_eval.significance import bootstrap_draws, confidence_intervals


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


def test_bootstrap_draws_count_sacrebleus_indices():
    draws = bootstrap_draws(7, 5, seed=3)
    indices = np.random.default_rng(3).choice(7, size=(5, 7), replace=True)
    assert draws.tolist() == [np.bincount(row, minlength=7).tolist() for row in indices]


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


API = {  # a call on a system -> what the InputError says
    "confidence_intervals given a dict": (lambda b: confidence_intervals({"map": b}), "must be a PerPrompt"),
    "confidence_intervals given an unknown key": (lambda b: confidence_intervals(b, keys=["p1"]), "unknown"),
}


@pytest.mark.parametrize("call, message", API.values(), ids=API.keys())
def test_confidence_intervals_refuse_what_they_cannot_take(call, message):
    gold, lists = systems()
    with pytest.raises(InputError, match=re.escape(message)):
        call(per_prompt(Scorer(["map", "rr"]), gold, lists[0], "base"))
