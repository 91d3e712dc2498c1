"""select takes --metric's direction from the metric registry (issue 31 trial): a lower-is-better
measure (the E measure, e{b}) is minimized without a flag, in the pick, the --json table and the
early-stopping replay; a count (num_ret, num_rel, num_rel_ret) is refused as --metric; --minimize,
never needed, is accepted where it agrees and refused where it would pick the worst checkpoint."""

import json

import pytest

from nbest_eval import Gold, GoldPrompt, Hyp
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest

#: three prompts, two valid translations each
GOLD = Gold([GoldPrompt(f"p{i}", f"source {i}", ((f"good {i}", 0.6), (f"fine {i}", 0.4))) for i in range(3)])
#: by hand, per prompt: "right" lists both valid translations (P = R = 1: F 1, E 0), "wrong" one invalid
#: one (P = R = 0: F 0, E 1), "half" one valid and one invalid (P = R = 1/2: F 1/2, E 1/2)
LISTS = {"ckpt1-wrong": {p.id: [Hyp("nonsense")] for p in GOLD},
         "ckpt2-right": {p.id: [Hyp(text) for text, _ in p.translations] for p in GOLD},
         "ckpt3-half": {p.id: [Hyp(p.translations[0][0]), Hyp("nonsense")] for p in GOLD}}


@pytest.fixture
def e_lists(tmp_path):
    write_gold(GOLD, tmp_path / "gold.txt")
    for name, lists in LISTS.items():
        write_nbest(lists, tmp_path / f"{name}.tsv", "tsv")
    return [str(tmp_path / "gold.txt")] + [str(tmp_path / f"{name}.tsv") for name in LISTS]


def select(e_lists, capsys, *options):
    gold, *inputs = e_lists
    status = main(["select", "--from-nbest", *inputs, "--gold", gold, "--no-cache", "--n-samples", "100",
                   *options])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("metric, values", [("e2", [1.0, 0.0, 0.5]), ("e0.5", [1.0, 0.0, 0.5]),
                                            ("f2", [0.0, 1.0, 0.5])])
def test_the_best_checkpoint_by_either_direction_is_the_right_one(e_lists, capsys, metric, values):
    status, out, _ = select(e_lists, capsys, "--metric", metric, "--json")
    assert status == 0
    table = json.loads(out)
    assert [s["values"][metric] for s in table["systems"]] == pytest.approx(values)
    assert table["best"] == table["choice"] == "ckpt2-right.tsv"
    assert table["maximize"] is metric.startswith("f")


def test_the_early_stopping_replay_minimizes_e_too(e_lists, capsys):
    """E falls 1 -> 0 -> 0.5: with patience 1 a strict replay keeps the second and stops after the third;
    maximizing E it would have kept the first and stopped after the second."""
    status, out, _ = select(e_lists, capsys, "--metric", "e2", "--patience", "1", "--stopping", "strict", "--json")
    assert status == 0
    stopping = json.loads(out)["stopping"]
    assert (stopping["kept"], stopping["stopped_after"]) == ("ckpt2-right.tsv", "ckpt3-half.tsv")


def test_minimize_is_accepted_where_it_agrees_with_the_measure(e_lists, capsys):
    status, out, _ = select(e_lists, capsys, "--metric", "e2", "--minimize", "--json")
    assert status == 0 and json.loads(out)["choice"] == "ckpt2-right.tsv"


def test_minimize_is_refused_where_it_would_pick_the_worst(e_lists, capsys):
    status, _, err = select(e_lists, capsys, "--metric", "f2", "--minimize")
    assert status == 2
    assert "--minimize" in err and "higher f2 is better" in err


@pytest.mark.parametrize("count", ["num_ret", "num_rel", "num_rel_ret"])
def test_a_count_is_no_selection_key(e_lists, capsys, count):
    status, _, err = select(e_lists, capsys, "--metric", count)
    assert status == 2
    assert f"--metric {count} is a count" in err


def test_an_unknown_selection_key_is_refused_before_any_scoring(e_lists, capsys):
    status, _, err = select(e_lists, capsys, "--metric", "nope")
    assert status == 2 and "unknown metric 'nope'" in err and "Traceback" not in err


def test_the_help_says_when_minimize_is_needed(capsys):
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--minimize" in help_text and "lower-is-better" in help_text
