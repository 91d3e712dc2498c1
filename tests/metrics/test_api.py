"""nbest_eval.score: the one-call API, on paths and on objects, against trec_eval and sacrebleu."""

import pytest
import pytrec_eval
import sacrebleu
from cases import random_case

import nbest_eval
from nbest_eval import Gold, GoldPrompt, InputError, norm
from nbest_eval.formats import write_gold, write_nbest


def test_score_paths_and_objects_agree_with_the_oracles(tmp_path):
    gold, nbest = random_case(seed=11, n_prompts=25)
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "nbest.tsv", "tsv")
    from_files = nbest_eval.score(tmp_path / "gold.txt", tmp_path / "nbest.tsv", metrics="map,bleu_1x1")
    from_objects = nbest_eval.score(gold, {pid: [h.text for h in hyps] for pid, hyps in nbest.items()},
                                    metrics=["map", "bleu_1x1"])
    assert from_files.values == pytest.approx(from_objects.values, abs=1e-12)
    assert from_files.n_prompts == len(gold)

    relevant = [p for p in gold if p.translations]
    qrels = {p.id: {norm(t): 1 for t, _ in p.translations} for p in relevant}
    run = {}
    for p in relevant:
        keys = list(dict.fromkeys(norm(h.text) for h in nbest.get(p.id, [])))
        run[p.id] = {k: float(len(keys) - i) for i, k in enumerate(keys)} or {"nothing": 0.0}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    assert from_objects.values["map"] == pytest.approx(sum(q["map"] for q in per_query.values()) / len(relevant))

    pairs = [(nbest[p.id][0].text, max(p.translations, key=lambda tw: tw[1])[0])
             for p in relevant if nbest.get(p.id)]
    expected = sacrebleu.corpus_bleu([h for h, _ in pairs], [[r for _, r in pairs]]).score
    assert from_objects.values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)


def test_score_refuses_what_is_not_a_hypothesis():
    gold = Gold([GoldPrompt("p", "x")])
    with pytest.raises(InputError, match="prompt p, rank 1: a hypothesis must be a string"):
        nbest_eval.score(gold, {"p": [3]}, metrics="map")
