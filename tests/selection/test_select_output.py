"""What `nbest-eval select` shows: the key measures in the text table (all of them on request and in
--json), the resamples its help promises, and, in an HF n-best save dir, no post-training re-evaluation
counted as one more checkpoint."""

import json

import pytest
from cases import random_case

from nbest_eval import Gold, GoldPrompt, Hyp
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.scorer import DEFAULT_METRICS, VALIDATION_METRICS
from nbest_eval.significance import DEFAULT_SAMPLES, resamples_for


@pytest.fixture
def hf_save_dir(tmp_path):
    """An HF callback's save_dir: steps 10 and 20, then trainer.evaluate()'s list of the loaded best model
    (step 10's), which the callback names after the last step: nbest-step20-2.jsonl."""
    gold, _ = random_case(3, n_prompts=12, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    lists = {keep: {p.id: [Hyp(t, -i) for i, (t, _) in enumerate(p.translations[:keep])] + [Hyp("zz", -9.0)]
                    for p in gold} for keep in (1, 3)}
    (tmp_path / "out").mkdir()
    for name, keep in (("nbest-step10", 3), ("nbest-step20", 1), ("nbest-step20-2", 3)):
        write_nbest(lists[keep], tmp_path / "out" / f"{name}.jsonl", "jsonl")
    return tmp_path


def test_a_post_training_evaluation_is_not_one_more_checkpoint(hf_save_dir, capsys):
    assert main(["select", "--from-nbest", str(hf_save_dir / "out"), "--gold", str(hf_save_dir / "gold.txt"),
                 "--metrics", "map", "--json", "--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert [s["name"] for s in json.loads(out)["systems"]] == ["nbest-step10.jsonl", "nbest-step20.jsonl"]
    assert "leaving out" in err and "nbest-step20-2.jsonl: a second evaluation at step 20 (" in err
    named = hf_save_dir / "out" / "nbest-step20-2.jsonl"  # named, it is scored
    assert main(["select", "--from-nbest", str(named), str(hf_save_dir / "out" / "nbest-step10.jsonl"),
                 "--gold", str(hf_save_dir / "gold.txt"), "--metrics", "map", "--json", "--no-cache"]) == 0
    assert len(json.loads(capsys.readouterr().out)["systems"]) == 2


def test_the_text_table_shows_the_key_measures_and_says_how_to_see_the_rest(hf_save_dir, capsys):
    argv = ["select", "--from-nbest", str(hf_save_dir / "out"), "--gold", str(hf_save_dir / "gold.txt"),
            "--metric", "p1", "--no-cache"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert [k for k in header if k in DEFAULT_METRICS] == ["p1", *VALIDATION_METRICS]
    hidden = [k for k in DEFAULT_METRICS if k not in ("p1", *VALIDATION_METRICS)]
    assert f"({len(hidden)} more measures, {', '.join(hidden)}: --columns all, or --json, --csv, --save FILE)" in out
    assert main(argv + ["--columns", "all"]) == 0
    assert [k for k in capsys.readouterr().out.splitlines()[0].split() if k in DEFAULT_METRICS][1:] == \
        [k for k in DEFAULT_METRICS if k != "p1"]
    assert main(argv + ["--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["systems"][0]["values"]) == list(DEFAULT_METRICS)
    assert main(argv + ["--columns", "nope"]) == 2 and "--columns: nope is not scored" in capsys.readouterr().err


def test_select_help_states_the_resamples_select_uses(capsys):
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: 1000 bootstrap resamples" not in text
    assert f"{resamples_for(10)} for 11 checkpoints" in text and resamples_for(10) == 2000
    assert f"{DEFAULT_SAMPLES['bs']} resamples or {DEFAULT_SAMPLES['ar']} trials" in text


def test_prompts_without_hypotheses_are_said_to_count_as_empty_lists(tmp_path, capsys):
    """Not "0 on every measure" (issue 31 trial): by hand, an empty list on a prompt with valid
    translations has E_2 1, and on one without any F1 1."""
    write_gold(Gold([GoldPrompt("p1", "x", (("a", 1.0),)), GoldPrompt("p2", "y", (("b", 1.0),)),
                     GoldPrompt("nil", "z", ())]), tmp_path / "gold.txt")
    for name in ("c1", "c2"):
        write_nbest({"p1": [Hyp("a")]}, tmp_path / f"{name}.tsv", "tsv")
    assert main(["select", "--from-nbest", str(tmp_path / "c1.tsv"), str(tmp_path / "c2.tsv"), "--gold",
                 str(tmp_path / "gold.txt"), "--metrics", "e2,f1", "--json", "--no-cache", "--n-samples", "100"]) == 0
    out, err = capsys.readouterr()
    assert "2 of 3 gold prompts have no hypotheses and count as empty lists" in err
    assert "0 on every measure" not in err and "e{b} 1" in err
    values = json.loads(out)["systems"][0]["values"]
    assert values["e2"] == pytest.approx((0 + 1 + 0) / 3) and values["f1"] == pytest.approx((1 + 0 + 1) / 3)
