"""select --pr-curve (issue 31): the mean interpolated recall-precision curve of the pick against the
first and the last checkpoint, a PNG beside the table and the points in --json; the points against
the mean of pytrec_eval's per-prompt iprec_at_recall, and the PNG checked with select's other outputs
(before any scoring, never replacing an input)."""

import json
import random

import pytest
import pytrec_eval
from cases import assert_png, random_case, trec_inputs

from nbest_eval import Gold, GoldPrompt, Hyp
from nbest_eval.analysis.systems import System
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.selection import Choice, Selection
from nbest_eval.selection.report import SelectReport, curve_legends

LEVELS = [f"{t / 10:.1f}" for t in range(11)]


def trec_eval_curve(gold, nbest):
    """The mean of trec_eval's per-prompt iprec_at_recall over the prompts with valid translations (one
    without a list: 0 at every level, as trec_eval -c counts it)."""
    qrels, run = trec_inputs(gold, nbest, graded=False)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall"}).evaluate(run)
    return [sum(per_query[q][f"iprec_at_recall_{level}0"] for q in per_query) / len(qrels) for level in LEVELS]



def select(capsys, *argv):
    status = main(["select", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def pr_case(tmp_path):
    """A random gold with nil-answer prompts and four checkpoints' n-best files: random lists, the same
    shuffled, every valid translation first (the best by MAP, in the middle of training), and lists
    reversed for about 70% of the prompts only."""
    gold, nbest = random_case(4, n_prompts=30, max_hyps=20)
    rng = random.Random(1)
    perfect = {p.id: [Hyp(text) for text, _ in p.translations] + nbest.get(p.id, []) for p in gold}
    lists = {"checkpoint1": nbest, "checkpoint2": {pid: rng.sample(hyps, len(hyps)) for pid, hyps in nbest.items()},
             "checkpoint3": perfect,
             "checkpoint4": {pid: hyps[::-1] for pid, hyps in nbest.items() if rng.random() < 0.7}}
    write_gold(gold, tmp_path / "gold.txt")
    for name, found in lists.items():
        write_nbest(found, tmp_path / f"{name}.tsv", "tsv")
    return gold, lists, tmp_path


def test_points_are_the_mean_of_trec_eval_s_per_prompt_iprec(pr_case, capsys):
    gold, lists, tmp = pr_case
    assert {p.id for p in gold if not p.translations}, "the gold should hold nil-answer prompts (left out)"
    png = tmp / "pr.png"
    status, out, err = select(capsys, "--from-nbest", *(tmp / f"{name}.tsv" for name in lists), "--gold",
                              tmp / "gold.txt", "--metrics", "map", "--pr-curve", png, "--json", "--no-cache")
    assert status == 0, err
    table = json.loads(out)
    assert table["choice"] == "checkpoint3.tsv"
    curve = table["pr_curve"]
    assert curve["levels"] == [float(level) for level in LEVELS] and curve["path"] == str(png)
    assert list(curve["systems"]) == ["checkpoint1.tsv", "checkpoint3.tsv", "checkpoint4.tsv"]  # first, pick, last
    for name, points in curve["systems"].items():
        assert points == pytest.approx(trec_eval_curve(gold, lists[name[:-4]]), abs=1e-12), name
    assert_png(png)
    values = {s["name"]: s["values"] for s in table["systems"]}
    assert [values["checkpoint2.tsv"][f"iprec{level}"] for level in LEVELS] == \
        pytest.approx(trec_eval_curve(gold, lists["checkpoint2"]), abs=1e-12)  # scored for every checkpoint


def test_text_output_shows_the_points(pr_case, capsys):
    gold, lists, tmp = pr_case
    status, out, err = select(capsys, "--from-nbest", tmp / "checkpoint1.tsv", tmp / "checkpoint3.tsv", "--gold",
                              tmp / "gold.txt", "--metrics", "map", "--pr-curve", tmp / "pr.png", "--no-cache")
    assert status == 0, err
    rows = out.split(f"mean interpolated precision at each recall level -> {tmp / 'pr.png'}")[1].splitlines()[2:4]
    assert [row.split()[0] for row in rows] == ["checkpoint1.tsv", "checkpoint3.tsv"]
    assert [float(v) for v in rows[1].split()[1:]] == pytest.approx(trec_eval_curve(gold, lists["checkpoint3"]),
                                                                    abs=5e-5)
    assert_png(tmp / "pr.png")


def test_follows_iprec_rule_on_the_textbook_example(tmp_path, capsys):
    """Baeza-Yates and Ribeiro-Neto's {d3, d56, d129} at ranks 3, 8 and 15 of 15: 0.2 from level 0.7
    (the textbook, exact), 0.25 at 0.7 for trec_eval's rule."""
    gold = Gold([GoldPrompt("q", "x", (("d3", 1.0), ("d56", 1.0), ("d129", 1.0)))])
    book = [Hyp(f"n{i}") for i in range(1, 16)]
    book[2], book[7], book[14] = Hyp("d3"), Hyp("d56"), Hyp("d129")
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest({"q": book}, tmp_path / "book.tsv", "tsv")
    expected = {"exact": [1 / 3] * 4 + [0.25] * 3 + [0.2] * 4, "trec_eval": [1 / 3] * 4 + [0.25] * 4 + [0.2] * 3}
    for rule, points in expected.items():
        status, out, err = select(capsys, "--from-nbest", tmp_path / "book.tsv", "--gold", tmp_path / "gold.txt",
                                  "--pr-curve", tmp_path / f"{rule}.png", "--iprec-rule", rule, "--json", "--no-cache")
        assert status == 0, err
        assert json.loads(out)["pr_curve"]["systems"] == {"book.tsv": pytest.approx(points, abs=1e-12)}


def test_an_existing_png_is_refused_before_scoring(pr_case, capsys, monkeypatch):
    _, lists, tmp = pr_case
    png = tmp / "pr.png"
    png.write_bytes(b"earlier")
    argv = ["--from-nbest", *(tmp / f"{name}.tsv" for name in lists), "--gold", tmp / "gold.txt", "--metrics", "map",
            "--pr-curve", png, "--no-cache"]
    from nbest_eval.cli import select_source

    with monkeypatch.context() as patched:
        patched.setattr(select_source, "read_nbest", lambda *a, **k: pytest.fail("scored before the check"))
        status, _, err = select(capsys, *argv)
        assert status == 2 and f"{png}: already exists; refusing to overwrite it with --pr-curve" in err, err
        status, _, err = select(capsys, *argv[:-3], "--pr-curve", tmp / "checkpoint2.tsv", "--force", "--no-cache")
        assert status == 2 and "--pr-curve is also an input" in err, err
        status, _, err = select(capsys, *argv[:-3], "--pr-curve", "-", "--no-cache")
        assert status == 2 and "--pr-curve: a figure needs a file name, not -" in err, err
    assert png.read_bytes() == b"earlier"
    status, _, err = select(capsys, *argv, "--force")
    assert status == 0, err
    assert_png(png)


def test_nothing_is_written_when_another_output_fails(pr_case, capsys):
    """--link-best with no best checkpoint (no value of --metric): neither --pr-curve nor --save appear."""
    gold, lists, tmp = pr_case
    nil = Gold([p for p in gold if not p.translations])
    write_gold(nil, tmp / "nil.txt")
    for name in ("checkpoint1", "checkpoint3"):
        write_nbest({p.id: lists[name].get(p.id, [Hyp("x")]) for p in nil}, tmp / f"nil-{name}.tsv", "tsv")
    status, _, err = select(capsys, "--from-nbest", tmp / "nil-checkpoint1.tsv", tmp / "nil-checkpoint3.tsv", "--gold",
                            tmp / "nil.txt", "--metrics", "map", "--pr-curve", tmp / "pr.png", "--save",
                            tmp / "table.json", "--link-best", tmp / "best", "--no-cache")
    assert status == 2 and "--link-best: no checkpoint has a value" in err, err
    assert not (tmp / "pr.png").exists() and not (tmp / "table.json").exists()


@pytest.mark.parametrize("names, choice, expected", [
    (["c1", "c2", "c3"], "c2", {"c1": "c1 (first)", "c2": "c2 (pick)", "c3": "c3 (last)"}),
    (["c1", "c2", "c3"], "c3", {"c1": "c1 (first)", "c3": "c3 (pick, last)"}),
    (["c1"], "c1", {"c1": "c1 (first, pick, last)"}),
    (["c1", "c2"], None, {"c1": "c1 (first)", "c2": "c2 (last)"}),  # no checkpoint has a value: no pick
])
def test_the_curves_are_the_pick_the_first_and_the_last(names, choice, expected):
    assert curve_legends(names, choice) == expected


def test_the_average_row_has_no_curve():
    """The --average row comes after the checkpoints; the last checkpoint is the one before it."""
    selection = Selection("map", True, Choice([0.5, 0.4, 0.3], 0, []), "bs", 100, 1, 0.05, "best", 0)
    report = SelectReport([System(name, {"map": 0.5}) for name in ("c1", "c2", "c3", "avg")], selection, {})
    assert report.curve_legends() == {"c1": "c1 (first, pick)", "c3": "c3 (last)"}
