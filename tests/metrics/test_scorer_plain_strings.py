"""Scorer.score takes hypotheses as nbest_eval.score does: a plain string is a
hypothesis without a model score, and anything else is a clear error naming the prompt and rank,
not AttributeError 'str' object has no attribute 'text'."""

import pytest

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, Scorer, score

GOLD = Gold([GoldPrompt("p1", "x", (("a", 0.7), ("b", 0.3))), GoldPrompt("p2", "y", (("c", 1.0),))])


def test_plain_strings_score_as_hyps_without_scores():
    scorer = Scorer(["map", "wf1", "bleu_1x1"])
    # by hand: p1 ranks z, a -> AP (1/2) / 2 = 0.25; p2 has no list -> 0; MAP 0.125
    as_text = scorer.score(GOLD, {"p1": ["z", "a"]})
    assert as_text.values["map"] == pytest.approx(0.125)
    assert as_text.values == scorer.score(GOLD, {"p1": [Hyp("z"), Hyp("a")]}).values
    assert as_text.values == score(GOLD, {"p1": ["z", "a"]}, metrics=scorer.keys).values


@pytest.mark.parametrize("nbest, message", [({"p1": ["a", 3]}, "prompt p1, rank 2: a hypothesis must be a string"),
                                            ({"p1": "a"}, "prompt p1: the hypotheses must be a list"),
                                            ({"p9": ["a"]}, "prompt id 'p9' is not in the gold")])
def test_other_values_are_named(nbest, message):
    with pytest.raises(InputError, match=message):
        Scorer(["map"]).score(GOLD, nbest)


def test_no_list_at_all_still_scores_every_prompt_as_empty():
    assert Scorer(["map"]).score(GOLD, {}).values == {"map": 0.0}
