"""Issue 29 trial: a missing prompt counts in BLEU as one empty hypothesis, which can RAISE BLEU
relative to the complete file (its references lower the brevity penalty, but its bad hypotheses
leave the n-gram precisions), so docs/metrics.md must not say a file lacking prompts loses BLEU.

Oracles: hand-computed BLEU and sacrebleu's corpus_bleu."""

import math
from pathlib import Path

import pytest
import sacrebleu

import nbest_eval
from nbest_eval import Gold, GoldPrompt

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
GOLD = Gold([GoldPrompt("p0", "one", (("a b c d", 1.0),)), GoldPrompt("p1", "two", (("e f g h", 1.0),))])
COMPLETE = {"p0": ["a b c d"], "p1": ["x y z w v u t s"]}  # p1: 8 tokens, none matching


def test_a_missing_bad_prompt_raises_bleu():
    # complete: 12 hypothesis tokens >= 8 reference tokens (no penalty); precisions 4/12, 3/10, 2/8, 1/6
    complete = nbest_eval.score(GOLD, COMPLETE, metrics="bleu_1x1").values["bleu_1x1"]
    assert complete == pytest.approx(100 * (4 * 3 * 2 * 1 / (12 * 10 * 8 * 6)) ** 0.25, abs=1e-9)
    assert complete == pytest.approx(sacrebleu.corpus_bleu(["a b c d", "x y z w v u t s"],
                                                           [["a b c d", "e f g h"]]).score, abs=1e-9)
    # p1 missing: one empty hypothesis; precisions all 1, brevity penalty exp(1 - 8/4)
    missing = nbest_eval.score(GOLD, {"p0": COMPLETE["p0"]}, metrics="bleu_1x1").values["bleu_1x1"]
    assert missing == pytest.approx(100 * math.exp(-1), abs=1e-9)
    assert missing == pytest.approx(sacrebleu.corpus_bleu(["a b c d", ""], [["a b c d", "e f g h"]]).score, abs=1e-9)
    assert missing > complete


def test_the_docs_do_not_say_missing_prompts_always_lower_bleu():
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    assert "loses BLEU as it loses MAP" not in text
    assert "BLEU can go either way" in text and "adds references and no matches" in text
