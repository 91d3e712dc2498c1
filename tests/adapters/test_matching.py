"""Source lines -> gold prompts (nbest_eval.matching), the rule both training adapters share."""

import pytest

from nbest_eval.data import Gold, GoldPrompt, InputError, prompt_id
from nbest_eval.matching import match_prompts


def _gold(texts, path="gold.txt"):
    return Gold([GoldPrompt(prompt_id(t), t, ((t.upper(), 1.0),)) for t in texts], path)


def test_match_by_id_scores_repeated_prompts_once():
    plan = match_prompts(["a b", "c d", "A B", "e f"], _gold(["c d", "a b", "e f"]))
    assert plan.rows == {0: prompt_id("a b"), 1: prompt_id("c d"), 3: prompt_id("e f")}
    assert plan.gold.ids() == [prompt_id(t) for t in ("a b", "c d", "e f")] and plan.repeats == 1
    subset = match_prompts(["a b", "c d", "a b", "e f"], _gold(["c d", "a b", "e f"]), max_prompts=2)
    assert list(subset.rows) == [0, 1] and len(subset.gold) == 2


@pytest.mark.parametrize("sources, gold, mode, message", [
    (["a b", "x y"], ["a b"], "id", "line 2 of the 'valid' split, 'x y', is not a prompt of the gold gold.txt"),
    (["a <unk>"], ["a b"], "id", "the line holds <unk>"),
    (["a b"], ["a b", "c d"], "order", "the 'valid' split has 1 lines but the gold gold.txt has 2 prompts"),
    (["c d", "a b"], ["a b", "c d"], "order", "line 1 of the 'valid' split, 'c d', is prompt 2 of the gold"),
    ([], ["a b"], "id", "the 'valid' split is empty"),
])
def test_match_rejects_a_gold_that_does_not_fit(sources, gold, mode, message):
    with pytest.raises(InputError) as err:
        match_prompts(sources, _gold(gold), mode, unk="<unk>")
    assert message in str(err.value)


def test_match_by_id_leaves_out_gold_prompts_no_line_names():
    match = match_prompts(["c d", "c d"], _gold(["a b", "c d", "e f"]))
    assert match.gold.ids() == [prompt_id("c d")] and (match.repeats, match.unmatched) == (1, 2)
    assert "2 gold prompt(s) named by no line are not scored" in match.summary()


def test_match_by_order_accepts_sources_it_cannot_read():
    plan = match_prompts(["a <unk>", "c d"], _gold(["a b", "c d"]), "order")
    assert plan.rows == {0: prompt_id("a b"), 1: prompt_id("c d")}


def test_match_by_text_when_ids_are_not_staple_ids():
    gold = Gold([GoldPrompt("p1", "a b", (("A B", 1.0),)), GoldPrompt("p2", "c d", (("C D", 1.0),))])
    assert match_prompts(["c d", "a b"], gold).gold.ids() == ["p2", "p1"]
