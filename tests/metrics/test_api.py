"""nbest_eval.score: the one-call API, on paths and on objects, against trec_eval and sacrebleu; lists
that are no n-best lists are refused as a reader refuses such a file."""

import math
import re

import pytest
import pytrec_eval
import sacrebleu
from cases import random_case

import nbest_eval
from nbest_eval import Gold, GoldPrompt, Hyp, InputError, norm
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

    pairs = [(nbest[p.id][0].text if nbest.get(p.id) else "", max(p.translations, key=lambda tw: tw[1])[0])
             for p in relevant]  # a prompt without a list: an empty output line
    expected = sacrebleu.corpus_bleu([h for h, _ in pairs], [[r for _, r in pairs]]).score
    assert from_objects.values["bleu_1x1"] == pytest.approx(expected, abs=1e-9)


def test_score_refuses_what_is_not_a_hypothesis():
    gold = Gold([GoldPrompt("p", "x")])
    with pytest.raises(InputError, match="prompt p, rank 1: a hypothesis must be a string"):
        nbest_eval.score(gold, {"p": [3]}, metrics="map")


# -- the lists are checked as a reader checks a file ------------------------------------------------------------

GOLD_COPY = "gold-copy.txt:2: this looks like a STAPLE gold file (translation|weight lines), not predictions"
API = {  # n-best lists given to nbest_eval.score -> what the error says
    "a string as a list": ({"p1": "olá"}, "prompt p1: the hypotheses must be a list, got str"),
    "no list at all": ({}, "no n-best list given"),
    "nan score": ({"p1": [Hyp("olá", math.nan)]}, "score nan is not a log-probability"),
    "+inf score": ({"p1": [Hyp("olá", math.inf)]}, "score inf is not a log-probability"),
    "string score": ({"p1": [Hyp("olá", "1")]}, "score '1' is not a log-probability"),
    "text not a string": ({"p1": [Hyp(3, -1.0)]}, "rank 1: a hypothesis must be a string"),
    "bytes": ({"p1": [b"ola"]}, "rank 1: a hypothesis must be a string"),
    "unknown id": ({"px": ["a"]}, "prompt id 'px' is not in the gold"),
    "not a mapping": ([("p1", ["olá"])], "must be a file or a mapping"),
    "None as a list": ({"p1": None}, "prompt p1: the hypotheses must be a list, got NoneType"),
}


@pytest.mark.parametrize("nbest, message", API.values(), ids=API.keys())
def test_the_python_api_checks_lists_as_readers_check_files(command_dir, nbest, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        nbest_eval.score(command_dir / "gold.txt", nbest, metrics="map")


def test_the_python_api_still_scores_valid_lists(command_dir):
    assert nbest_eval.score(command_dir / "gold.txt", {"p1": ("olá",), "p2": [Hyp("x", -math.inf)]},
                            metrics="map").values["map"] == 0.25  # p1: 1/2, p2: 0
    with pytest.raises(InputError, match="gold and nbest name the same file"):
        nbest_eval.score(command_dir / "gold.txt", command_dir / "gold-link.txt")
    with pytest.raises(InputError, match=re.escape(GOLD_COPY)):
        nbest_eval.score(command_dir / "gold.txt", command_dir / "gold-copy.txt")
