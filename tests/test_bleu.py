"""x-best y-reference BLEU against sacrebleu's own corpus_bleu on the literal pseudo-corpus."""

import pytest
import sacrebleu
from cases import random_case

from nbest_eval import Scorer
from nbest_eval.metrics.bleu import top_references


def pseudo_corpus_bleu(gold, nbest, x, y, **options):
    """The definition: one segment per hypothesis, its prompt's top-y references, None-padded."""
    hyps, refs = [], []
    for prompt in gold:
        by_weight = sorted(prompt.translations, key=lambda tw: tw[1], reverse=True)  # stable: ties in file order
        prompt_refs = [text for text, _ in by_weight][:y]
        if not prompt_refs:
            continue
        for hyp in nbest.get(prompt.id, [])[:x]:
            hyps.append(hyp.text)
            refs.append(prompt_refs)
    width = max(len(r) for r in refs)
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(width)]
    return sacrebleu.corpus_bleu(hyps, streams, **options).score


@pytest.mark.parametrize("x, y", [(1, 1), (3, 2), (5, 5), (None, None), (1, None), (None, 3)])
@pytest.mark.parametrize("tokenize, lowercase", [("13a", False), ("13a", True), ("none", False),
                                                 ("intl", True), ("char", False)])
def test_bleu_equals_sacrebleu_pseudo_corpus(x, y, tokenize, lowercase):
    gold, nbest = random_case(x or 7, n_prompts=25, max_valid=10, max_hyps=12)
    key = f"bleu_{x or 'all'}x{y or 'all'}"
    got = Scorer([key], bleu_tokenize=tokenize, bleu_lowercase=lowercase).score(gold, nbest).values[key]
    expected = pseudo_corpus_bleu(gold, nbest, x, y, tokenize=tokenize, lowercase=lowercase)
    assert abs(got - expected) < 1e-9


def test_references_are_the_highest_weight_translations_ties_in_file_order():
    from nbest_eval import GoldPrompt
    prompt = GoldPrompt("p", "x", (("c", 0.1), ("a", 0.5), ("b", 0.1), ("d", 0.3)))
    assert top_references(prompt, 3) == ["a", "d", "c"]
    assert top_references(prompt, None) == ["a", "d", "c", "b"]


def test_reference_statistics_are_reused_across_calls():
    gold, nbest = random_case(2, n_prompts=10, nil_prompts=False)
    scorer = Scorer(["bleu_5x5"])
    first = scorer.score(gold, nbest).values
    cached = dict(scorer.bleu._references)
    assert len(cached) == len(gold)
    assert scorer.score(gold, nbest).values == first
    assert all(scorer.bleu._references[k] is v for k, v in cached.items())


@pytest.mark.parametrize("key", ["bleu_0x1", "bleu_1x0", "bleu_x", "bleu_1x1x1"])
def test_malformed_bleu_keys_are_rejected(key):
    from nbest_eval import UnknownMetric
    with pytest.raises(UnknownMetric, match="valid keys"):
        Scorer([key])


def test_is_metric_key_recognizes_keys_without_building_them():
    from nbest_eval.metrics import is_metric_key
    assert all(is_metric_key(k) for k in ["map", "p10", "ndcg5", "rbp_t", "wf1", "pref_pearson", "bleu_allx100"])
    assert not any(is_metric_key(k) for k in ["loss", "bleu", "bleu_0x1", "p0", "eval_map"])
