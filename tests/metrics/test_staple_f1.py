"""STAPLE F1 against an independent re-statement of the official scorer's rules."""

import math
import sys
import unicodedata

import pytest
from cases import random_case

from nbest_eval import GoldPrompt, Hyp, InputError, Scorer

# the official scorer strips, lowercases and deletes punctuation with a translate table
PUNCT = dict.fromkeys(i for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P"))
KEYS = ["wf1", "f1", "precision", "recall", "wrecall"]


def official(translations, predictions):
    gold = {}
    for text, weight in translations:
        gold[text.strip().lower().translate(PUNCT)] = weight
    pred = {p.strip().lower().translate(PUNCT) for p in predictions}
    tp = [p for p in pred if p in gold]
    prec = len(tp) / len(pred) if pred else 0.0
    rec = len(tp) / len(gold)
    wrec = sum(gold[p] for p in tp) / sum(gold.values())
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    wf1 = 2 * prec * wrec / (prec + wrec) if prec + wrec else 0.0
    return {"wf1": wf1, "f1": f1, "precision": prec, "recall": rec, "wrecall": wrec}


@pytest.mark.parametrize("seed", range(6))
def test_f1_family_equals_official_rules(seed):
    gold, nbest = random_case(seed, nil_prompts=False)
    scorer = Scorer(KEYS)
    sums = dict.fromkeys(KEYS, 0.0)
    for prompt in gold:
        hyps = nbest.get(prompt.id, [])
        expected = official(prompt.translations, [h.text for h in hyps])
        values = scorer.values(scorer.prompt_stats(prompt, hyps))
        for key in KEYS:
            assert values[key] == pytest.approx(expected[key], abs=1e-12)
            sums[key] += expected[key]
    totals = scorer.score(gold, nbest).values
    for key in KEYS:
        assert totals[key] == pytest.approx(sums[key] / len(gold), abs=1e-12)


def test_later_duplicate_gold_line_replaces_the_weight():
    prompt = GoldPrompt("p", "x", (("Olá!", 0.2), ("ola", 0.5), ("olá", 0.3)))
    scorer = Scorer(["wrecall"])
    assert scorer.values(scorer.prompt_stats(prompt, [Hyp("olá")]))["wrecall"] == pytest.approx(0.3 / 0.8)


def test_top_n_truncation():
    prompt = GoldPrompt("p", "x", (("a", 0.6), ("b", 0.4)))
    scorer = Scorer(KEYS, wf1_top=1)
    values = scorer.values(scorer.prompt_stats(prompt, [Hyp("a"), Hyp("b")]))
    assert values == pytest.approx(official(prompt.translations, ["a"]))


def test_threshold_truncation_keeps_a_fraction_of_the_top_probability():
    prompt = GoldPrompt("p", "x", (("a", 0.6), ("b", 0.4), ("c", 0.1)))
    hyps = [Hyp("a", math.log(0.5)), Hyp("b", math.log(0.2)), Hyp("c", math.log(0.05))]
    scorer = Scorer(["recall"], wf1_threshold=0.3)  # keeps p >= 0.15: a, b
    assert scorer.values(scorer.prompt_stats(prompt, hyps))["recall"] == pytest.approx(2 / 3)


def test_threshold_without_scores_names_the_prompt():
    prompt = GoldPrompt("prompt_x", "x", (("a", 1.0),))
    with pytest.raises(InputError, match="prompt_x"):
        Scorer(["wf1"], wf1_threshold=0.5).prompt_stats(prompt, [Hyp("a")])


def test_nil_answer_prompt_rewards_an_empty_prediction():
    prompt = GoldPrompt("p", "x", ())
    scorer = Scorer(KEYS)
    assert set(scorer.values(scorer.prompt_stats(prompt, [])).values()) == {1.0}
    assert set(scorer.values(scorer.prompt_stats(prompt, [Hyp("a")])).values()) == {0.0}
