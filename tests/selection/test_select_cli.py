"""`nbest-eval select --from-nbest`: scores, best, patience replay, cache, link; inputs untouched."""

import hashlib
import json
import math
import os
import re

import pytest
from cases import random_case

from nbest_eval import Hyp, Scorer
from nbest_eval.cli import main
from nbest_eval.data import Gold, GoldPrompt, InputError
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.training.early_stopping import EarlyStopping


@pytest.fixture
def checkpoint_lists(tmp_path):
    """Five 'checkpoints' whose n-best lists keep a growing share of valid translations, then decay."""
    gold, nbest = random_case(4, n_prompts=15, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    runs = tmp_path / "nbest"
    runs.mkdir()
    for epoch, keep in [(1, 0), (2, 2), (3, 4), (10, 3), (11, 1)]:
        lists = {p.id: [Hyp(t, -i) for i, (t, _) in enumerate(p.translations[:keep])] + [Hyp("zz", -9.0)]
                 for p in gold}
        write_nbest(lists, runs / f"checkpoint{epoch}.tsv", "tsv")
    write_gold(gold, runs / "valid.gold.txt")  # as the plugin's --nbest-save-dir has: not a system
    (runs / "checkpoint1.json").write_text("{}")
    return gold, tmp_path


def digest(folder):
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in sorted(os.listdir(folder))
            if not f.startswith(".")}


def test_select_scores_orders_and_replays_patience(checkpoint_lists, capsys):
    gold, tmp = checkpoint_lists
    before = digest(tmp / "nbest")
    assert main(["select", "--from-nbest", str(tmp / "nbest"), "--gold", str(tmp / "gold.txt"),
                 "--metrics", "map,wf1", "--patience", "1", "--stopping", "strict", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    names = [s["name"] for s in table["systems"]]
    assert names == ["checkpoint1.tsv", "checkpoint2.tsv", "checkpoint3.tsv", "checkpoint10.tsv", "checkpoint11.tsv"]
    maps = [s["values"]["map"] for s in table["systems"]]
    scorer = Scorer(["map"])
    from nbest_eval.formats import read_nbest
    assert maps == [scorer.score(gold, read_nbest(tmp / "nbest" / n, gold)).values["map"] for n in names]
    assert table["best"] == names[maps.index(max(maps))] == "checkpoint3.tsv"
    assert table["patience_choice"] == "checkpoint3.tsv" and table["patience_stopped_at"] == "checkpoint10.tsv"
    assert table["stopping"] == {"rule": "strict", "patience": 1, "stopped_after": "checkpoint10.tsv",
                                 "kept": "checkpoint3.tsv", "p_value": 1.0}
    assert digest(tmp / "nbest") == before


@pytest.mark.parametrize("rule", ["significant", "declined", "strict"])
def test_select_replays_the_rule_the_training_loop_decides_with(checkpoint_lists, capsys, rule):
    """The replay is EarlyStopping.replay on the checkpoints' statistics, its kept checkpoint judged by
    select's own paired test against the best."""
    from nbest_eval.selection import systems_of_files
    from nbest_eval.training.early_stopping import EarlyStopping

    gold, tmp = checkpoint_lists
    assert main(["select", "--from-nbest", str(tmp / "nbest"), "--gold", str(tmp / "gold.txt"), "--metrics", "map",
                 "--patience", "2", "--stopping", rule, "--stopping-warmup", "0", "--json", "--no-cache"]) == 0
    table = json.loads(capsys.readouterr().out)
    names = [s["name"] for s in table["systems"]]
    decisions, stopped = EarlyStopping("map", rule, 2, warmup=0).replay(
        [None] * 5, systems_of_files(gold, [tmp / "nbest" / n for n in names], ["map"]))
    replay = table["stopping"]
    assert replay["stopped_after"] == (None if stopped is None else names[stopped])
    assert replay["kept"] == names[decisions[-1].kept]
    kept = table["systems"][names.index(replay["kept"])]
    assert replay["p_value"] == (1.0 if kept["name"] == table["best"] else kept["notes"]["p_value"])


def test_select_caches_and_rescoring_only_new_inputs(checkpoint_lists, capsys, monkeypatch):
    _, tmp = checkpoint_lists
    args = ["select", "--from-nbest", str(tmp / "nbest"), "--gold", str(tmp / "gold.txt"), "--metrics", "map"]
    assert main(args) == 0
    first = capsys.readouterr().out
    cache = tmp / "nbest" / ".nbest-eval-select-cache.json"
    assert len(json.loads(cache.read_text())) == 5
    import nbest_eval.cli.select_source as select
    calls = []
    real = select.read_nbest
    monkeypatch.setattr(select, "read_nbest", lambda *a: calls.append(a[0]) or real(*a))
    (tmp / "nbest" / "checkpoint12.tsv").write_text((tmp / "nbest" / "checkpoint1.tsv").read_text())
    assert main(args) == 0
    assert [os.path.basename(c) for c in calls] == ["checkpoint12.tsv"]
    assert capsys.readouterr().out.startswith(first.splitlines()[0])


def test_link_best_and_table_file(checkpoint_lists, capsys):
    _, tmp = checkpoint_lists
    args = ["select", "--from-nbest", str(tmp / "nbest"), "--gold", str(tmp / "gold.txt"), "--metrics", "map",
            "--link-best", str(tmp / "best"), "--save", str(tmp / "table.csv"), "--no-cache"]
    assert main(args) == 0
    assert os.path.realpath(tmp / "best") == str(tmp / "nbest" / "checkpoint3.tsv")
    assert (tmp / "table.csv").read_text().startswith("system,map,ci_mean,ci_low,ci_high,p_value,p_holm,tied\n")
    assert re.search(r"^\*T +checkpoint3\.tsv ", capsys.readouterr().out, re.MULTILINE)
    assert main(args) == 2  # neither the link nor the table is replaced without --force
    assert main(args + ["--force"]) == 0


def test_missing_input_is_a_clear_error(checkpoint_lists, capsys):
    _, tmp = checkpoint_lists
    assert main(["select", "--from-nbest", str(tmp / "nope*"), "--gold", str(tmp / "gold.txt")]) == 2
    assert "nope*" in capsys.readouterr().err


def test_replay_script_tables_every_rule_as_select_replays_it(checkpoint_lists, capsys):
    """scripts/replay_stopping.py (experiments.replay_stopping): one row per rule and patience, each as
    select --stopping replays it."""
    from experiments import replay_stopping as script
    from nbest_eval.training.early_stopping import RULES

    _, tmp = checkpoint_lists
    assert script.main(["--gold", str(tmp / "gold.txt"), str(tmp / "nbest"), "--patience", "1", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[0], r[1]) for r in rows] == [(rule, p) for rule in RULES for p in ("1", "2")]
    for rule, p, stop, kept, *_ in rows:
        assert main(["select", "--from-nbest", str(tmp / "nbest"), "--gold", str(tmp / "gold.txt"), "--metrics",
                     "map", "--patience", p, "--stopping", rule, "--json", "--no-cache"]) == 0
        replay = json.loads(capsys.readouterr().out)["stopping"]
        assert (replay["stopped_after"] or "never", replay["kept"]) == (stop, kept)


# -- the stopping replay's alpha and resamples -----------------------------------------------------

def test_the_alpha_bound_is_printed_exactly():
    """1000 resamples: the smallest p-value is 1/1001 = 0.000999000999...; 0.0009990005 lies below it
    and is refused, so the bound said must not read 0.000999; the float just above it is taken."""
    bound = 1 / 1001
    with pytest.raises(InputError) as refused:
        EarlyStopping("map", "significant", 3, alpha=0.0009990005)
    said = str(refused.value).split("use an alpha above ")[1]
    assert said == "1 / 1001 = 0.000999000999000999 (exactly)"
    assert float(said.split(" = ")[1].split()[0]) == bound
    EarlyStopping("map", "significant", 3, alpha=math.nextafter(bound, 1))


def select_stopping(tmp_path, capsys, *options):
    gold = tmp_path / "gold.txt"
    if not gold.exists():
        write_gold(Gold([GoldPrompt("p1", "hi", (("olá", 1.0),))]), gold)
    main(["select", str(tmp_path), "--from-nbest", "--gold", str(gold), "--patience", "3", *options])
    return capsys.readouterr().err


def test_select_n_samples_reaches_the_stopping_replay(tmp_path, capsys):
    """--n-samples 20000 puts --alpha 0.0001 within the replay's reach (1 / 20001 < 0.0001); with 2000
    the refusal counts 2000 resamples, not the default 1000."""
    assert "out of reach" not in select_stopping(tmp_path, capsys, "--alpha", "0.0001", "--n-samples", "20000")
    err = select_stopping(tmp_path, capsys, "--alpha", "0.0001", "--n-samples", "2000")
    assert "alpha 0.0001 is out of reach: with 2000 paired-bootstrap resamples" in err, err
