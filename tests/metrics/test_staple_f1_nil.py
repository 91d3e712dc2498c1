"""--wf1-nil: what a prompt without valid translations (nil answer) counts for in the means of the
predicted set's measures (the F1 family, f{b}, e{b}). ``score`` (the default, every earlier number):
1 when nothing is predicted, else 0, in a mean over all prompts. ``skip``: left out of the mean, as
STAPLE's official scorer (staple_2020_scorer.py) does: its gold reader keeps no prompt without
translations, so the macro averages run over the answered prompts only."""

import json

import pytest
from cases import random_case

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.signature import signatures

SET_KEYS = ["wf1", "f1", "precision", "recall", "wrecall", "f2", "e1"]

# The issue's example: one nil-answer prompt, one answered prompt with {"o gato": 0.7, "um gato": 0.3}
# whose list is ["o gato"]. The answered prompt, by hand: P = 1/1, R = 1/2, weighted R = 0.7/1.0;
# wF1 = 2 * 1 * 0.7 / 1.7 = 14/17 = 0.8235; F1 = 2 * 1 * 0.5 / 1.5 = 2/3;
# F2 = 5 P R / (4 P + R) = 2.5 / 4.5 = 5/9; E1 = 1 - F1 = 1/3.
# skip: the official scorer's mean over the answered prompt alone, wF1 14/17 = 0.8235.
# score: the nil prompt with an empty list scores 1 on each F, so wF1 = (1 + 14/17) / 2 = 31/34 = 0.9118
# (and E1 = (0 + 1/3) / 2); with a prediction ("algo") it scores 0, so wF1 = (0 + 14/17) / 2 = 7/17.
ANSWERED = {"wf1": 14 / 17, "f1": 2 / 3, "precision": 1.0, "recall": 0.5, "wrecall": 0.7, "f2": 5 / 9, "e1": 1 / 3}
NIL_EMPTY = {**dict.fromkeys(SET_KEYS, 1.0), "e1": 0.0}
NIL_PREDICTED = {**dict.fromkeys(SET_KEYS, 0.0), "e1": 1.0}
NIL = GoldPrompt("nil", "nothing to say", ())
GOLD = Gold([NIL, GoldPrompt("cat", "the cat", (("o gato", 0.7), ("um gato", 0.3)))])


def example(nil_list):
    return {"nil": nil_list, "cat": [Hyp("o gato", -0.1)]}


@pytest.mark.parametrize("nil_list, nil_values", [([], NIL_EMPTY), ([Hyp("algo", -0.2)], NIL_PREDICTED)])
def test_the_issue_example_under_both_rules(nil_list, nil_values):
    scored = Scorer(SET_KEYS).score(GOLD, example(nil_list)).values
    assert scored == pytest.approx({k: (nil_values[k] + ANSWERED[k]) / 2 for k in SET_KEYS}, abs=1e-12)
    skipped = Scorer(SET_KEYS, wf1_nil="skip").score(GOLD, example(nil_list)).values
    assert skipped == pytest.approx(ANSWERED, abs=1e-12)
    if not nil_list:
        assert (round(scored["wf1"], 4), round(skipped["wf1"], 4)) == (0.9118, 0.8235)


def test_skip_is_the_default_rule_on_the_gold_without_its_nil_prompts():
    gold, nbest = random_case(11, n_prompts=40)
    nil = {p.id for p in gold if not p.translations}
    assert nil and len(nil) < len(gold)
    answered = Gold([p for p in gold if p.id not in nil])
    expected = Scorer(SET_KEYS).score(answered, {k: v for k, v in nbest.items() if k not in nil}).values
    assert Scorer(SET_KEYS, wf1_nil="skip").score(gold, nbest).values == pytest.approx(expected, abs=1e-12)


def test_a_nil_prompt_alone_is_undefined_when_skipped():
    scorer = Scorer(["wf1", "map"], wf1_nil="skip")
    assert scorer.score(Gold([NIL]), {}).values == {"wf1": None, "map": None}


def test_other_measures_do_not_move():
    gold, nbest = random_case(12, n_prompts=30)
    others = ["map", "rr", "ap_t", "coverage", "num_ret", "bleu_2x2"]
    assert Scorer(others, wf1_nil="skip").score(gold, nbest).values == Scorer(others).score(gold, nbest).values


@pytest.mark.parametrize("rule", ["score", "skip"])
def test_shards_add_up_to_the_whole(rule):
    gold, nbest = random_case(13, n_prompts=40)
    scorer = Scorer(SET_KEYS, wf1_nil=rule)
    rows = [scorer.prompt_stats(p, nbest.get(p.id, [])) for p in gold]
    shards = [sum(rows[start::3], scorer.zero()) for start in range(3)]
    whole = sum(rows, scorer.zero())
    assert scorer.values(sum(shards, scorer.zero())) == pytest.approx(scorer.values(whole), abs=1e-12)
    assert scorer.score(gold, nbest).values == pytest.approx(scorer.values(whole), abs=1e-12)


def test_the_signature_names_the_rule_only_when_it_is_not_the_default():
    default, skip = (signatures(Scorer(["wf1", "f2", "map"], **given), GOLD, 1) for given in ({}, {"wf1_nil": "skip"}))
    assert default["wf1"].startswith("wf1|trunc:none|nbest:1|")
    assert skip["wf1"].startswith("wf1|trunc:none|nil:skip|nbest:1|")
    assert skip["f2"].startswith("f2|trunc:none|nil:skip|")
    assert skip["map"] == default["map"]
    assert Scorer(["wf1"], wf1_nil="score").options == Scorer(["wf1"]).options


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="wf1_nil must be one of score, skip; got 'drop'"):
        Scorer(["wf1"], wf1_nil="drop")


@pytest.fixture
def nil_files(tmp_path):
    gold, nbest = random_case(14, n_prompts=250)  # over 200 prompts: --jobs 3 runs several workers
    gold = Gold([NIL, *gold])
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest({**nbest, "nil": [Hyp("algo", -0.5)]}, tmp_path / "run.tsv", "tsv")
    return gold, nbest, [str(tmp_path / "gold.txt"), str(tmp_path / "run.tsv")]


@pytest.mark.parametrize("argv, rule", [([], "score"), (["--wf1-nil", "score"], "score"),
                                        (["--wf1-nil", "skip"], "skip")])
def test_the_command_line_flag_for_any_number_of_workers(nil_files, capsys, argv, rule):
    gold, nbest, (gold_file, run_file) = nil_files
    expected = Scorer(["wf1", "e1"], wf1_nil=rule).score(gold, {**nbest, "nil": [Hyp("algo", -0.5)]}).values
    for jobs in ("1", "3"):
        assert main(["score", "--gold", gold_file, "--nbest", run_file, "--metrics", "wf1,e1", "--json",
                     "--jobs", jobs, *argv]) == 0
        out = json.loads(capsys.readouterr().out)
        assert {k: out[k] for k in expected} == pytest.approx(expected, abs=1e-12)
        assert ("|nil:skip|" in out["signatures"]["wf1"]) == (rule == "skip")


def test_the_command_line_refuses_an_unknown_rule(nil_files, capsys):
    _, _, (gold_file, run_file) = nil_files
    with pytest.raises(SystemExit):
        main(["score", "--gold", gold_file, "--nbest", run_file, "--wf1-nil", "official"])
    assert "invalid choice: 'official' (choose from" in capsys.readouterr().err
