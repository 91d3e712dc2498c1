"""The gold ablation and the compare / ablate commands: known values, PNG and JSON outputs, errors,
and a run on the real STAPLE en_pt gold."""

import json
import random

import pytest
from cases import assert_png, random_case

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.analysis.ablation import ablate, ablate_gold, kept_count
from nbest_eval.cli import main
from nbest_eval.cli.compare import covering
from nbest_eval.formats import write_gold, write_nbest


def run_cli(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_ablated_gold_keeps_the_most_frequent_translations_in_file_order():
    prompt = GoldPrompt("p", "x", (("a", 0.1), ("b", 0.4), ("c", 0.2), ("d", 0.2), ("e", 0.1)))
    gold = Gold([prompt, GoldPrompt("nil", "y")])
    assert [t for t, _ in ablate_gold(gold, 0.4)["p"].translations] == ["b", "c"]  # c before d: file order
    assert [t for t, _ in ablate_gold(gold, 0.5)["p"].translations] == ["b", "c", "d"]  # ceil(2.5)
    assert [t for t, _ in ablate_gold(gold, 0.1)["p"].translations] == ["b"]  # at least one
    assert ablate_gold(gold, 1.0)["p"].translations == prompt.translations
    assert ablate_gold(gold, 1.0)["p"] is not prompt  # a fresh object: scorers cache per prompt object
    assert ablate_gold(gold, 0.5)["nil"].translations == ()
    assert [kept_count(k / 10, 10) for k in range(1, 11)] == list(range(1, 11))  # no 0.3 * 10 -> 4


def test_ablation_at_fraction_one_reproduces_the_full_gold_scores():
    gold, _ = random_case(3, n_prompts=30)
    graded_runs = [(f"s{seed}", None, random_case(seed, n_prompts=30)[1]) for seed in (3, 4, 5)]
    metrics = ["map", "wf1", "bleu_5x5"]
    result = ablate(gold, graded_runs, lambda: Scorer(metrics), fractions=(0.5, 1.0))
    for name, _, nbest in graded_runs:
        full = Scorer(metrics).score(gold, nbest).values
        assert result.tables[1.0].systems[result.full.names.index(name)].values == full
    assert all(result.agreement[1.0][m]["spearman"] == 1.0 for m in metrics)
    assert result.kept[1.0] == sum(len(p.translations) for p in gold)


def test_covering_drops_repeated_grid_values():
    assert covering(("1", "5", "10", "100", "1000"), 50) == ["1", "5", "10", "100"]
    assert covering(("1", "5", "10", "100", "1000"), 5000) == ["1", "5", "10", "100", "1000"]
    assert covering(("1", "5", "10", "100", "all"), 3) == ["1", "5"]
    assert covering(("1", "5", "10", "100", "all"), 700) == ["1", "5", "10", "100", "all"]


@pytest.fixture
def scores_csv(tmp_path):
    """map ranks a > b > c > d > e; top_swap swaps a and b, bottom_swap d and e."""
    path = tmp_path / "scores.csv"
    path.write_text("system,map,top_swap,bottom_swap\n"
                    "a,0.5,0.4,0.5\nb,0.4,0.5,0.4\nc,0.3,0.3,0.3\nd,0.2,0.2,0.1\ne,0.1,0.1,0.2\n")
    return path


def test_compare_scores_table_known_values(tmp_path, scores_csv, capsys):
    heatmap = tmp_path / "heat.png"
    status, out, _ = run_cli(capsys, "compare", "--scores", scores_csv, "--json", "--heatmap", heatmap,
                             "--coefficient", "tau_ap")
    assert status == 0
    result = json.loads(out)
    assert result["systems"] == list("abcde") and result["reference"] == "map"
    top, bottom = result["agreement"]["top_swap"], result["agreement"]["bottom_swap"]
    assert top["spearman"] == pytest.approx(0.9) == bottom["spearman"]
    assert top["kendall"] == pytest.approx(0.8) == bottom["kendall"]
    assert (top["tau_ap"], bottom["tau_ap"]) == (pytest.approx(0.5), pytest.approx(0.875))
    assert top["pearson_rank"] < bottom["pearson_rank"] and top["n"] == 5
    assert_png(heatmap)

    status, out, _ = run_cli(capsys, "compare", "--scores", scores_csv, "--reference", "top_swap")
    assert status == 0 and "reference: top_swap" in out and "bottom_swap" in out


@pytest.fixture
def graded_runs(tmp_path):
    """A random gold and three systems of decreasing quality (more hypotheses replaced by junk)."""
    gold, _ = random_case(11, n_prompts=40, nil_prompts=False)
    gold_path = tmp_path / "gold.txt"
    write_gold(gold, gold_path)
    rng = random.Random(5)
    paths = []
    for name, junk in (("good", 0.0), ("fair", 0.4), ("poor", 0.8)):
        nbest = {p.id: [Hyp(f"junk {rng.random()}" if rng.random() < junk else text, -float(rank))
                        for rank, (text, _) in enumerate(sorted(p.translations, key=lambda t: -t[1]))]
                 for p in gold}
        write_nbest(nbest, tmp_path / f"{name}.tsv", "tsv")
        paths.append(tmp_path / f"{name}.tsv")
    return gold_path, paths


def test_compare_nbest_files_with_bleu_grid_and_scatter(tmp_path, graded_runs, capsys):
    gold, paths = graded_runs
    grid, scatter, scores = tmp_path / "grid.png", tmp_path / "fig5.png", tmp_path / "s.json"
    status, out, _ = run_cli(capsys, "compare", "--gold", gold, "--nbest", *paths, "--metrics", "p1,wf1,bleu_1x1",
                             "--bleu-grid", grid, "--scatter", "map,bleu_1x1", scatter, "--write-scores", scores,
                             "--json")
    assert status == 0
    result = json.loads(out)
    assert result["systems"] == ["good", "fair", "poor"]
    assert set(result["agreement"]) == {"p1", "wf1", "bleu_1x1"}
    assert result["agreement"]["wf1"]["spearman"] == pytest.approx(1.0)
    # the longest list and the largest gold set have 12 items: 100 covers them, 1000 and all repeat it
    assert result["bleu_grid"]["x"] == ["1", "5", "10", "100"] == result["bleu_grid"]["y"]
    assert len(result["bleu_grid"]["values"]) == 4 and all(len(row) == 4 for row in result["bleu_grid"]["values"])
    assert 0 <= result["scatter"][0]["r2"] <= 1
    assert_png(grid)
    assert_png(scatter)
    table = json.loads(scores.read_text())
    assert [s["name"] for s in table["systems"]] == ["good", "fair", "poor"]
    assert "bleu_1x1" in table["systems"][0]["values"] and "bleu_1x5" in table["systems"][0]["values"]

    # outputs are never replaced without --force, and nothing is scored before that is known
    status, _, err = run_cli(capsys, "compare", "--gold", gold, "--nbest", *paths, "--bleu-grid", grid)
    assert status == 2 and "grid.png: already exists" in err
    status, _, _ = run_cli(capsys, "compare", "--gold", gold, "--nbest", *paths, "--metrics", "p1",
                           "--bleu-grid", grid, "--force")
    assert status == 0


@pytest.mark.parametrize("command, option", [
    ("compare", ["--heatmap", "-"]), ("compare", ["--bleu-grid", "-"]), ("compare", ["--scatter", "map,rr", "-"]),
    ("compare", ["--pr-curve", "-"]), ("compare", ["--paired", "bs", "--precision-histogram", "-"]),
    ("ablate", ["--plot", "-"])])
def test_a_figure_on_standard_output_is_refused(tmp_path, graded_runs, capsys, command, option, monkeypatch):
    """A figure needs a file: '-' would write a PNG to a file named '-'. Said before anything is read."""
    gold, paths = graded_runs
    monkeypatch.chdir(tmp_path)
    status, _, err = run_cli(capsys, command, "--gold", gold, "--nbest", *paths[:2], *option)
    assert status == 2 and f"{option[-2]}: a figure needs a file name, not -" in err, err
    assert not (tmp_path / "-").exists()


def test_ablate_command(tmp_path, graded_runs, capsys):
    gold, paths = graded_runs
    plot = tmp_path / "ablation.png"
    status, out, _ = run_cli(capsys, "ablate", "--gold", gold, "--nbest", *paths, "--names", "A", "B", "C",
                             "--fractions", "0.25,0.5,1", "--plot", plot, "--json")
    assert status == 0
    assert_png(plot)
    result = json.loads(out)
    assert result["systems"] == ["A", "B", "C"] and result["metrics"] == ["map"]
    assert [f["fraction"] for f in result["fractions"]] == [0.25, 0.5, 1.0]
    last = result["fractions"][-1]
    assert last["scores"] == result["full"]
    assert last["agreement"]["map"] == {"spearman": 1.0, "pearson_rank": pytest.approx(1.0), "n": 3}
    status, out, _ = run_cli(capsys, "ablate", "--gold", gold, "--nbest", *paths, "--metric", "map,p1",
                             "--fractions", "0.5,1")
    assert status == 0 and "map:spearman" in out and "p1:pearson_rank" in out


def test_bad_inputs_are_named(tmp_path, graded_runs, scores_csv, capsys):
    gold, paths = graded_runs
    one = tmp_path / "one.csv"
    one.write_text("system,map,bleu_1x1\nonly,0.5,10\n")
    cases = [
        (["compare", "--scores", scores_csv, "--reference", "nope"], "unknown measure 'nope'"),
        (["compare", "--scores", scores_csv, "--scatter", "map,nope", tmp_path / "x.png"], "unknown measure 'nope'"),
        (["compare", "--gold", gold, "--nbest", *paths, "--metrics", "mapp"], "unknown metric 'mapp'"),
        (["compare", "--scores", one], "one.csv: comparing rankings needs at least 2 systems, got 1"),
        (["compare", "--gold", gold, "--nbest", paths[0]], "at least 2 systems, got 1"),
        (["ablate", "--gold", gold, "--nbest", paths[0]], "at least 2 n-best files, got 1"),
        (["compare", "--scores", tmp_path / "missing.csv"], "missing.csv: cannot read"),
        (["ablate", "--gold", gold, "--nbest", paths[0], tmp_path / "gone.tsv"], "gone.tsv: cannot read"),
        (["compare", "--gold", tmp_path / "nogold.txt", "--nbest", *paths], "nogold.txt: cannot read"),
        (["compare", "--scores", scores_csv, "--bleu-grid", tmp_path / "g.png"], "--bleu-grid scores n-best files"),
        (["compare", "--gold", gold, "--nbest", *paths, "--names", "a", "a", "b"], "'a' is used twice"),
        (["compare"], "give either --scores FILE or --gold GOLD --nbest"),
    ]
    for argv, message in cases:
        status, _, err = run_cli(capsys, *argv)
        assert status == 2 and message in err, (argv, err)
    assert not (tmp_path / "x.png").exists()


def corrupted_systems(gold, levels, top=10, seed=1):
    """Each prompt's `top` most frequent translations, each replaced with probability `level` by an
    invalid near-copy (an extra word), so quality falls as the level rises."""
    rng = random.Random(seed)
    return [(f"c{level:g}", None, {p.id: [Hyp(text + " talvez" if rng.random() < level else text)
                                          for text, _ in sorted(p.translations, key=lambda t: -t[1])[:top]]
                                   for p in gold})
            for level in levels]


def test_real_gold_ablation_keeps_the_corruption_ranking(en_pt_gold):
    levels = (0.0, 0.3, 0.6, 0.9)
    graded_runs = corrupted_systems(en_pt_gold, levels)
    result = ablate(en_pt_gold, graded_runs, lambda: Scorer(["map", "p1"]), fractions=(0.1, 0.5, 1.0))
    for fraction, table in [(None, result.full)] + list(result.tables.items()):
        maps = table.column("map")
        assert maps == sorted(maps, reverse=True) and len(set(maps)) == len(maps), fraction
    for fraction, by_metric in result.agreement.items():
        assert by_metric["map"]["spearman"] == pytest.approx(1.0), fraction
        assert by_metric["map"]["pearson_rank"] > 0.9, fraction
    assert result.tables[1.0].column("map") == result.full.column("map")
    assert result.kept[0.1] < result.kept[0.5] < result.kept[1.0] == sum(len(p.translations) for p in en_pt_gold)


def test_real_gold_compare_command(tmp_path, en_pt_gold, capsys):
    gold = Gold(en_pt_gold.prompts[:100])
    write_gold(gold, tmp_path / "gold.txt")
    paths = []
    for name, _, nbest in corrupted_systems(gold, (0.0, 0.25, 0.5, 0.75), seed=2):
        write_nbest(nbest, tmp_path / f"{name}.tsv", "tsv")
        paths.append(tmp_path / f"{name}.tsv")
    status, out, _ = run_cli(capsys, "compare", "--gold", tmp_path / "gold.txt", "--nbest", *paths,
                             "--metrics", "p1,wf1,bleu_1x1", "--heatmap", tmp_path / "h.png", "--json")
    assert status == 0
    result = json.loads(out)
    for measure in ("p1", "wf1", "bleu_1x1"):
        assert result["agreement"][measure]["spearman"] == pytest.approx(1.0), measure
        assert result["agreement"][measure]["tau_ap"] == pytest.approx(1.0), measure
    assert_png(tmp_path / "h.png")
