"""x-best y-reference BLEU against sacrebleu's own corpus_bleu on the literal pseudo-corpus.

A prompt without hypotheses counts as one empty hypothesis, as sacrebleu scores an empty output line,
so BLEU, MAP and wF1 agree on what was scored (a file covering 3 of 100 prompts is no BLEU 100); that
can raise BLEU as well as lower it, as docs/metrics.md says. Oracles: sacrebleu's corpus_bleu on the
pseudo-corpus with "" for each missing list, and hand-computed cases."""

import json
import math
import string
from pathlib import Path

import pytest
import sacrebleu
from cases import random_case
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

import nbest_eval
from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import read_gold, write_gold, write_nbest
from nbest_eval.metrics.bleu import BleuEngine, BoundedCache, Fast13a, top_references, word_ngrams
from nbest_eval.processes.workers import score_stream


def pseudo_corpus_bleu(gold, nbest, x, y, **options):
    """The definition: one segment per hypothesis, its prompt's top-y references, None-padded; a prompt
    without hypotheses is one empty segment ("", as sacrebleu scores an empty output line)."""
    hyps, refs = [], []
    for prompt in gold:
        by_weight = sorted(prompt.translations, key=lambda tw: tw[1], reverse=True)  # stable: ties in file order
        prompt_refs = [text for text, _ in by_weight][:y]
        if not prompt_refs:
            continue
        for text in [hyp.text for hyp in nbest.get(prompt.id, [])[:x]] or [""]:
            hyps.append(text)
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


PIECES = list(string.printable) + ["é", "ç", "。", "«", "\u00a0", "&amp;", "&quot;", "&lt;", "&gt;", "<skipped>",
                                   "-\n", "1.5", "2,0"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT | st.text())
def test_fast_13a_is_sacrebleus_13a(text):
    engine = BleuEngine("13a")
    assert isinstance(engine.tokenizer, Fast13a)
    assert engine.tokenizer(text) == Tokenizer13a()(text)


@pytest.mark.parametrize("digit", ["", "1"])
def test_fast_13a_next_to_every_code_point(digit):
    """Every character between letters, in a line without an ASCII digit (whose path relies on its
    whitespace being str.split's) and with one."""
    line = digit + "".join(f"a{chr(c)}b" for c in range(0x110000) if not "0" <= chr(c) <= "9")
    reference = Tokenizer13a()
    try:
        assert BleuEngine("13a").tokenizer(line) == reference(line)
    finally:  # sacrebleu memoizes: do not keep megabytes
        type(reference).__call__.cache_clear()
        type(reference._post_tokenizer).__call__.cache_clear()


NGRAM_TEXT = st.lists(st.sampled_from(["a", "b", "ab", "é", "。", " ", "\t", "\n", "\u00a0", "\u2003", "", "."]),
                      max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(NGRAM_TEXT | st.text(), st.integers(1, 6))
def test_word_ngrams_is_sacrebleus_extract_all_word_ngrams(line, max_order):
    ours, theirs = word_ngrams(line, max_order), extract_all_word_ngrams(line, 1, max_order)
    assert ours == theirs
    assert list(ours[0].items()) == list(theirs[0].items())  # the same keys in the same order


@pytest.mark.parametrize("line", ["", " ", " \t\n ", "a", "a a a a a", "a b a b a b", "x\u00a0y\u2003x y", "。 é é"])
def test_word_ngrams_hand_cases(line):
    for max_order in (1, 2, 4):
        ours, theirs = word_ngrams(line, max_order), extract_all_word_ngrams(line, 1, max_order)
        assert ours == theirs and list(ours[0]) == list(theirs[0])


SMALL = st.lists(st.sampled_from(["a", "b", "c", "o", "que", ",", "?", "1", "-", "1.5"]), max_size=9).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(SMALL, max_size=12), st.lists(SMALL, min_size=1, max_size=5))
def test_segment_stats_are_sacrebleus_sums(hyps, refs):
    """Per statistic, against sacrebleu's own per-segment code; the small vocabulary makes hypotheses
    repeat n-grams of every order more often than the references (clipping)."""
    prompt = GoldPrompt("p", "x", tuple((r, 1.0) for r in refs))
    bleu = BLEU()
    ref_info = bleu._extract_reference_info([bleu._preprocess_segment(r) for r in refs])
    expected = [0] * 10
    for hyp in hyps:
        stats = bleu._compute_segment_statistics(bleu._preprocess_segment(hyp), ref_info)
        expected = [total + value for total, value in zip(expected, stats)]
    assert BleuEngine().segment_stats(hyps, prompt, None) == expected


def test_fast_13a_on_every_real_gold_translation(staple_dir):
    fast, reference = BleuEngine("13a").tokenizer, Tokenizer13a()
    texts = [t for p in read_gold(staple_dir / "dev.en_pt.2020-02-20.gold.txt") for t, _ in p.translations]
    assert [fast(t) for t in texts] == [reference(t) for t in texts]


def test_a_scorer_reused_on_new_lists_still_equals_sacrebleu():
    """Cached references and cached segments (hypotheses seen in an earlier call) give sacrebleu's value."""
    gold, first = random_case(3, n_prompts=25, max_valid=10, max_hyps=12)
    _, second = random_case(4, n_prompts=25, max_valid=10, max_hyps=12)
    second = {pid: hyps for pid, hyps in second.items() if pid in {p.id for p in gold}}
    scorer = Scorer(["bleu_5x5", "bleu_allxall"])
    for nbest in (first, second, first):
        values = scorer.score(gold, nbest).values
        assert abs(values["bleu_5x5"] - pseudo_corpus_bleu(gold, nbest, 5, 5)) < 1e-9
        assert abs(values["bleu_allxall"] - pseudo_corpus_bleu(gold, nbest, None, None)) < 1e-9


def test_the_tokenization_cache_is_bounded_and_keeps_what_is_used():
    computed = []
    cache = BoundedCache(lambda text: computed.append(text) or text.upper(), size=2)
    assert cache("a b") == "A B" and cache("a b") == "A B" and computed == ["a b"]
    for text in ("c", "d", "a b", "e", "f", "g"):  # "a b" used again in the second generation
        cache(text)
    assert len(cache.new) + len(cache.old) <= 4
    assert computed == ["a b", "c", "d", "e", "f", "g"]  # "a b" came back from the previous generation
    cache("c")  # two turnovers ago and not used since: computed again
    assert computed[-1] == "c"


# -- a prompt without hypotheses: one empty segment ----------------------------------------------------------

def test_a_file_covering_3_of_100_prompts_is_not_bleu_100():
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}", ((f"tradução número {i} aqui", 1.0),)) for i in range(100)])
    nbest = {f"p{i}": [f"tradução número {i} aqui"] for i in range(3)}
    result = nbest_eval.score(gold, nbest, metrics="bleu_1x1,map,wf1")
    expected = pseudo_corpus_bleu(gold, {k: [Hyp(t) for t in v] for k, v in nbest.items()}, 1, 1)
    assert result.values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)
    assert result.values["bleu_1x1"] < 1  # brevity penalty exp(1 - 400 / 12)
    assert result.values["map"] == pytest.approx(0.03) and result.values["wf1"] == pytest.approx(0.03)


def test_hand_computed_brevity_penalty_of_a_missing_prompt():
    """Prompt 1: 'a b c d' exactly (4 of 4 n-grams of each order); prompt 2: no list, references of 3
    words (weight 2) and 2 words. With both references the empty segment's closest reference length is
    the shorter, 2: sys 4, ref 6, so BLEU = 100 * exp(1 - 6 / 4); with the top one only, 3: exp(1 - 7 / 4).
    Dropping prompt 2 would give 100."""
    gold = Gold([GoldPrompt("p1", "one", (("a b c d", 1.0),)), GoldPrompt("p2", "two", (("x y z", 2.0), ("x y", 1.0)))])
    for key, ref_len in (("bleu_1x1", 7), ("bleu_5x1", 7), ("bleu_1x2", 6), ("bleu_5xall", 6), ("bleu_allxall", 6)):
        for lists in ({"p1": ["a b c d"]}, {"p1": ["a b c d"], "p2": []}):  # no list, an empty list: the same
            assert nbest_eval.score(gold, lists, metrics=key).values[key] == pytest.approx(
                100 * math.exp(1 - ref_len / 4), abs=1e-9)


@pytest.mark.parametrize("x, y", [(1, 1), (3, 2), (None, None), (None, 3)])
def test_missing_and_empty_lists_equal_sacrebleu_with_empty_lines(x, y):
    gold, nbest = random_case(21, n_prompts=40, max_valid=6, max_hyps=5)
    nbest.update({pid: [] for pid in gold.ids()[::7]})  # explicit empty lists beside the missing ones
    assert len(nbest) < len(gold) or any(not hyps for hyps in nbest.values())
    key = f"bleu_{x or 'all'}x{y or 'all'}"
    got = Scorer([key]).score(gold, nbest).values[key]
    assert got == pytest.approx(pseudo_corpus_bleu(gold, nbest, x, y), abs=1e-9)


def test_every_scoring_path_counts_the_missing_prompts(tmp_path, capsys):
    """In memory, streamed over 1 or 3 workers, read by each worker from the file, and the command:
    the same value, with every prompt the stream never names counted."""
    gold, nbest = random_case(5, n_prompts=320, max_valid=5, max_hyps=4)
    missing = [pid for pid in gold.ids() if pid not in nbest]
    assert len(missing) > 10
    expected = pseudo_corpus_bleu(gold, nbest, 1, 1)
    scorer = Scorer(["bleu_1x1", "bleu_3x2"])
    assert scorer.score(gold, nbest).values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)
    for jobs in (1, 3):
        streamed = score_stream(Scorer(scorer.keys), gold, iter(nbest.items()), jobs=jobs)
        assert streamed.values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "n.tsv", "tsv")
    for jobs in ("1", "3"):
        assert main(["score", "--gold", str(tmp_path / "gold.txt"), "--nbest", str(tmp_path / "n.tsv"),
                     "--metrics", "bleu_1x1", "--json", "--jobs", jobs]) == 0
        assert json.loads(capsys.readouterr().out)["bleu_1x1"] == pytest.approx(expected, abs=1e-9)


def test_statistics_of_shards_add_up_to_the_whole():
    gold, nbest = random_case(8, n_prompts=30, max_hyps=4)
    scorer = Scorer(["bleu_4x3"])
    whole = scorer.score(gold, nbest).stats
    halves = [Gold(gold.prompts[:13]), Gold(gold.prompts[13:])]
    parts = [scorer.score(half, {k: v for k, v in nbest.items() if k in half}).stats for half in halves]
    assert parts[0] + parts[1] == whole


# A missing prompt can RAISE BLEU relative to the complete file: its references lower the brevity
# penalty, but its bad hypotheses leave the n-gram precisions; docs/metrics.md must not say otherwise.
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
