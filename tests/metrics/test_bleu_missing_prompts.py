"""Issue 29, problem 8: a prompt without hypotheses counts in x-best y-reference BLEU as one empty
hypothesis, as sacrebleu scores an empty output line, so BLEU, MAP and wF1 agree on what was scored
(it once dropped out of the pseudo-corpus: a file covering 3 of 100 prompts got bleu_1x1 100.0).

Oracles: sacrebleu's corpus_bleu on the pseudo-corpus with "" for each missing list, and a
hand-computed case."""

import math

import pytest
import sacrebleu
from cases import random_case

import nbest_eval
from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.processes.workers import score_stream


def sacrebleu_with_empty_lines(gold, nbest, x, y):
    """The pseudo-corpus: each prompt with references gives its top x hypotheses as segments, or one
    "" when it has none; references padded with None."""
    hyps, refs = [], []
    for prompt in gold:
        prompt_refs = [t for t, _ in sorted(prompt.translations, key=lambda tw: -tw[1])][:y]
        if not prompt_refs:
            continue
        for text in [h.text for h in nbest.get(prompt.id, [])[:x]] or [""]:
            hyps.append(text)
            refs.append(prompt_refs)
    width = max(map(len, refs))
    return sacrebleu.corpus_bleu(hyps, [[r[i] if i < len(r) else None for r in refs] for i in range(width)]).score


def test_a_file_covering_3_of_100_prompts_is_not_bleu_100():
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}", ((f"tradução número {i} aqui", 1.0),)) for i in range(100)])
    nbest = {f"p{i}": [f"tradução número {i} aqui"] for i in range(3)}
    result = nbest_eval.score(gold, nbest, metrics="bleu_1x1,map,wf1")
    expected = sacrebleu_with_empty_lines(gold, {k: [Hyp(t) for t in v] for k, v in nbest.items()}, 1, 1)
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
    assert got == pytest.approx(sacrebleu_with_empty_lines(gold, nbest, x, y), abs=1e-9)


def test_every_scoring_path_counts_the_missing_prompts(tmp_path, capsys):
    """In memory, streamed over 1 or 3 workers, read by each worker from the file, and the command:
    the same value, with every prompt the stream never names counted."""
    gold, nbest = random_case(5, n_prompts=320, max_valid=5, max_hyps=4)
    missing = [pid for pid in gold.ids() if pid not in nbest]
    assert len(missing) > 10
    expected = sacrebleu_with_empty_lines(gold, nbest, 1, 1)
    scorer = Scorer(["bleu_1x1", "bleu_3x2"])
    assert scorer.score(gold, nbest).values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)
    for jobs in (1, 3):
        streamed = score_stream(Scorer(scorer.keys), gold, iter(nbest.items()), jobs=jobs)
        assert streamed.values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "n.tsv", "tsv")
    import json

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
