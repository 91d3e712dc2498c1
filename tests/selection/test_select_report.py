"""select's library entry point (selection.select_checkpoints): n-best files scored through the
cache without the CLI, a typed SelectReport, and the CLI's outputs are that report's renderings."""

import random

import pytest
from cases import random_case

from nbest_eval import Hyp, InputError
from nbest_eval.cli import main
from nbest_eval.formats import read_nbest, write_gold, write_nbest
from nbest_eval.scorer import Scorer
from nbest_eval.selection import SelectReport, select_checkpoints


@pytest.fixture
def three_lists(tmp_path):
    """Three checkpoints' lists: random, every valid translation first (MAP 1 by hand: each relevant
    item is ranked before any other), and the random lists reversed."""
    gold, nbest = random_case(7, n_prompts=15, nil_prompts=False)
    perfect = {p.id: [Hyp(text) for text, _ in p.translations] + nbest.get(p.id, []) for p in gold}
    rng = random.Random(2)
    lists = {"c1": nbest, "c2": perfect, "c3": {pid: rng.sample(h, len(h)) for pid, h in nbest.items()}}
    write_gold(gold, tmp_path / "gold.txt")
    paths = []
    for name, found in lists.items():
        write_nbest(found, tmp_path / f"{name}.tsv", "tsv")
        paths.append(str(tmp_path / f"{name}.tsv"))
    return gold, paths, tmp_path


def test_the_library_scores_through_the_cache_and_returns_a_typed_report(three_lists):
    gold, paths, tmp = three_lists
    calls = []

    def generate(path):
        calls.append(path)
        return read_nbest(path, gold)

    def run():
        return select_checkpoints(paths, gold, Scorer(["map", "p1"]), generate, n_samples=100,
                                  cache=str(tmp / "cache.json"))

    report = run()
    assert isinstance(report, SelectReport)
    assert report.best == report.pick == "c2.tsv" and report.systems[1].values["map"] == pytest.approx(1.0)
    assert "c2.tsv" in report.tied and report.keys == ["map", "p1"]
    assert report.pick_path == paths[1] and set(report.digests) == set(paths)
    assert calls == paths
    again = run()  # every checkpoint from the cache: nothing generated again, the same result
    assert calls == paths and again.to_json() == report.to_json()


def test_the_cli_prints_the_report_s_renderings(three_lists, capsys):
    gold, paths, tmp = three_lists
    report = select_checkpoints(paths, gold, Scorer(["map", "p1"]), lambda path: read_nbest(path, gold),
                                n_samples=100)
    argv = ["select", "--from-nbest", *paths, "--gold", str(tmp / "gold.txt"), "--metrics", "map,p1",
            "--n-samples", "100", "--no-cache"]
    renderings = {"--json": report.to_json(), "--csv": report.to_csv(), "--columns=p1": report.to_text(["p1"])}
    for option, rendering in renderings.items():
        assert main(argv + [option]) == 0
        assert capsys.readouterr().out == rendering


@pytest.mark.parametrize("options", [["--patience", "1", "--prefer", "earliest-tied"], ["--paired", "t"],
                                     ["--pr-curve", "pr.png"]])
def test_a_saved_table_reads_back_as_the_report_it_was(three_lists, capsys, options):
    """select --save's JSON is the report's table: read back, it renders the text select printed and
    the very file it wrote (the typed access for scripts that read a saved selection)."""
    _, paths, tmp = three_lists
    saved = tmp / "select.json"
    options = [str(tmp / o) if o.endswith(".png") else o for o in options]
    assert main(["select", "--from-nbest", *paths, "--gold", str(tmp / "gold.txt"), "--metrics", "map,p1",
                 "--n-samples", "100", "--no-cache", "--columns", "all", "--save", str(saved), *options]) == 0
    printed = capsys.readouterr().out
    report = SelectReport.read(saved)
    assert report.to_json() == saved.read_text()
    assert report.to_text() == printed
    assert report.best == "c2.tsv"
    if "--patience" in options:  # the replay and the earliest tied pick, typed
        assert report.selection.stopping.rule.patience == 1 and report.pick == report.tied[0]


def test_a_csv_table_is_no_saved_report(three_lists):
    _, paths, tmp = three_lists
    assert main(["select", "--from-nbest", *paths, "--gold", str(tmp / "gold.txt"), "--metrics", "map",
                 "--n-samples", "100", "--no-cache", "--save", str(tmp / "t.csv")]) == 0
    with pytest.raises(InputError, match="not a table of select's"):
        SelectReport.read(tmp / "t.csv")


def test_the_documented_python_call_runs_as_written(three_lists, monkeypatch, capsys):
    """docs/cli.md's "select in Python" block, run in a folder holding its file names: it picks the
    list with every valid translation first (MAP 1 by hand)."""
    from pathlib import Path

    _, paths, tmp = three_lists
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    code = text.split("### select in Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp / "runs").mkdir()
    for path in paths:
        Path(path).rename(tmp / "runs" / Path(path).name)
    (tmp / "gold.txt").rename(tmp / "valid.gold.txt")
    monkeypatch.chdir(tmp)
    namespace = {}
    exec(compile(code, "docs/cli.md", "exec"), namespace)
    assert namespace["report"].best == "c2.tsv"
    assert "best by map: c2.tsv" in capsys.readouterr().out
