"""compare's typed result (analysis.comparison): built without the CLI, rendered by itself, and the
CLI's --json is that rendering."""

import json

import pytest

from nbest_eval.analysis.comparison import Comparison, compare_systems
from nbest_eval.analysis.systems import System, SystemTable, write_table
from nbest_eval.cli import main


@pytest.fixture
def table():
    """map ranks a < b < c; p1 the other way round; f1 agrees with map but is undefined for b."""
    return SystemTable([System("a", {"map": 0.1, "p1": 0.9, "f1": 0.2}),
                        System("b", {"map": 0.2, "p1": 0.5, "f1": None}),
                        System("c", {"map": 0.3, "p1": 0.1, "f1": 0.4})])


def test_a_comparison_is_typed_and_renders_itself(table):
    comparison = compare_systems(table, "map", ["p1", "f1"])
    assert isinstance(comparison, Comparison) and comparison.systems == ["a", "b", "c"]
    # by hand: p1 reverses map's ranking of three systems; f1 keeps it over the two it is defined for
    assert (comparison.agreement["p1"]["spearman"], comparison.agreement["p1"]["kendall"]) == (-1.0, -1.0)
    assert comparison.agreement["p1"]["n"] == 3 and comparison.agreement["f1"]["n"] == 2
    data = json.loads(comparison.to_json())
    assert list(data) == ["reference", "systems", "agreement", "scatter"] and data["scatter"] == []
    lines = comparison.to_text().splitlines()
    assert lines[0] == "3 systems; reference: map"
    assert lines[2].split() == ["p1", "-1.0000", "-1.0000", "-1.0000", "-1.0000", "3"]


def test_the_cli_prints_the_result_s_own_rendering(table, tmp_path, capsys):
    write_table(table, tmp_path / "t.json")
    comparison = compare_systems(table, "map", ["p1", "f1"])
    assert main(["compare", "--scores", str(tmp_path / "t.json"), "--json"]) == 0
    assert capsys.readouterr().out == comparison.to_json()
    assert main(["compare", "--scores", str(tmp_path / "t.json")]) == 0
    assert capsys.readouterr().out == comparison.to_text()


def test_runs_are_scored_and_tested_in_the_library_as_the_cli_does(tmp_path, capsys):
    """compare_runs: the n-best runs scored, each tested against the first; --json is its rendering."""
    from cases import random_case

    from nbest_eval.analysis.comparison import compare_runs
    from nbest_eval.analysis.systems import read_runs
    from nbest_eval.formats import read_gold, write_gold, write_nbest
    from nbest_eval.scorer import Scorer

    gold, nbest = random_case(3, n_prompts=12, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    paths = []
    for name, lists in (("a", nbest), ("b", {pid: hyps[::-1] for pid, hyps in nbest.items()}),
                        ("c", {pid: hyps[:1] for pid, hyps in nbest.items()})):
        write_nbest(lists, tmp_path / f"{name}.tsv", "tsv")
        paths.append(str(tmp_path / f"{name}.tsv"))
    gold = read_gold(str(tmp_path / "gold.txt"))
    runs = read_runs(gold, paths)
    comparison = compare_runs(Scorer(["map", "p1"]), gold, runs, "map", ["p1"], test="t",
                              coverage={name: 12 for name, _, _ in runs})
    assert comparison.paired.baseline == "a" and list(comparison.paired.systems) == ["a", "b", "c"]
    assert comparison.paired.systems["a"]["map"].p_value is None  # the baseline is not tested against itself
    assert 0 <= comparison.paired.systems["b"]["map"].p_value <= comparison.paired.systems["b"]["map"].p_holm <= 1
    assert main(["compare", "--gold", str(tmp_path / "gold.txt"), "--nbest", *paths, "--metrics", "p1",
                 "--paired", "t", "--json"]) == 0
    assert capsys.readouterr().out == comparison.to_json()
