"""Source lines -> gold prompts (nbest_eval.training.matching), the rule both training adapters share."""

import pytest

from nbest_eval.data import Gold, GoldPrompt, InputError, prompt_id
from nbest_eval.training.matching import OptionNames, match_prompts


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


def test_match_by_order_refuses_a_gold_of_other_prompts():
    """Same count, other sentences: every list would score 0 (issue 29, problem 5)."""
    with pytest.raises(InputError) as err:
        match_prompts(["a b", "c d", "e f"], _gold(["x y", "c d", "z w"]), "order")
    assert "only 1 of 3 lines are their prompt's text" in str(err.value)
    assert "e.g. line 1, 'a b', is paired with 'x y'" in str(err.value)


def test_match_by_order_refuses_sources_with_bpe_left_in():
    """sentencepiece pieces not removed: no line is its prompt's text, so no hypothesis could be either."""
    with pytest.raises(InputError, match="only 0 of 2 lines"):
        match_prompts(["\u2581a \u2581b", "\u2581c \u2581d"], _gold(["a b", "c d"]), "order")


def test_match_by_order_takes_sources_the_scorer_reads_as_the_prompt():
    """Lowercased, tokenized or <unk>-holding lines of the right prompts: case, punctuation and spacing
    aside they are the prompts' text; a line with <unk> is not counted either way."""
    gold = _gold(["I like apples.", "Is it 'good'?", "a b c", "d e f"])
    sources = ["i like apples .", "is it ' good ' ?", "a <unk> c", "x <unk> z"]
    assert match_prompts(sources, gold, "order", unk="<unk>").gold.ids() == gold.ids()
    with pytest.raises(InputError, match="only 1 of 4 lines"):  # most lines are are other sentences
        match_prompts(sources[:1] + ["is it bad ?", "a b x", "d e f g"], gold, "order", unk="<unk>")


def test_mismatch_advice_names_the_callers_options_and_when_order_is_right():
    """The id-mismatch error advises matching by position only for the same prompts in the same order
    (it shows both first lines to compare), in the caller's own option names; neutral by default."""
    gold, sources = _gold(["a b", "c d"]), ["a b", "x y"]
    with pytest.raises(InputError) as err:
        match_prompts(sources, gold)
    neutral = str(err.value)
    assert ("match by position (matching by order) only if the two files hold the same prompts in the same order: "
            "line 1 of the 'valid' split must be the sentence of prompt 1 of the gold gold.txt, 'a b' (it is 'a b')"
            ) in neutral
    assert "--nbest" not in neutral and "prompt_map" not in neutral
    names = OptionNames(order="prompt_map='order'", undo="the prompts are the source texts as written")
    with pytest.raises(InputError) as err:
        match_prompts(sources, gold, names=names)
    assert "check that the gold belongs to these sources and that the prompts are the source texts as written" \
        in str(err.value) and "match by position (prompt_map='order') only if" in str(err.value)
    with pytest.raises(InputError, match="only 0 of 1 lines.*check that the prompts are the source texts as written"):
        match_prompts(["x y"], _gold(["a b"]), "order", names=names)
