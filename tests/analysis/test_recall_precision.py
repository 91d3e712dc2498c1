"""compare --pr-curve (each system's mean interpolated recall-precision curve) and compare --paired
--precision-histogram (per prompt, one system's R-precision minus the other's), issue 31: the curve's
points against trec_eval's per-prompt iprec_at_recall and the textbook's example, the bars against a
hand-made case, the PNGs, and the rules every compare output follows (checked first, all or none)."""

import json
import random

import pytest
import pytrec_eval
from cases import assert_png, random_case, trec_inputs

from nbest_eval import Gold, GoldPrompt, Hyp, InputError
from nbest_eval.analysis.recall_precision import precision_histogram
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.scorer import Scorer
from nbest_eval.significance import PerPrompt

LEVELS = [f"{t / 10:.1f}" for t in range(11)]



def compare(capsys, *argv):
    status = main(["compare", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def write_systems(tmp, gold, systems):
    write_gold(gold, tmp / "gold.txt")
    for name, nbest in systems.items():
        write_nbest(nbest, tmp / f"{name}.tsv", "tsv")
    return tmp / "gold.txt", [tmp / f"{name}.tsv" for name in systems]


def trec_eval_curve(gold, nbest):
    """The mean over the prompts with valid translations of trec_eval's per-prompt iprec_at_recall
    (a prompt without a list: 0 at every level, as trec_eval -c counts it)."""
    qrels, run = trec_inputs(gold, nbest, graded=False)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"iprec_at_recall"}).evaluate(run)
    return [sum(per_query[q][f"iprec_at_recall_{level}0"] for q in per_query) / len(qrels) for level in LEVELS]


@pytest.fixture
def random_systems(tmp_path):
    """A random gold with nil-answer prompts and three systems: its random lists, the same lists shuffled,
    and the lists reversed for about 70% of the prompts only."""
    gold, nbest = random_case(4, n_prompts=30, max_hyps=20)
    rng = random.Random(1)
    systems = {"listed": nbest, "shuffled": {pid: rng.sample(hyps, len(hyps)) for pid, hyps in nbest.items()},
               "partial": {pid: hyps[::-1] for pid, hyps in nbest.items() if rng.random() < 0.7}}
    paths = write_systems(tmp_path, gold, systems)
    return gold, systems, paths


def test_curve_points_are_the_mean_of_trec_eval_s_per_prompt_iprec(random_systems, tmp_path, capsys):
    gold, systems, (gold_path, paths) = random_systems
    assert {p.id for p in gold if not p.translations}, "the gold should hold nil-answer prompts (left out)"
    png = tmp_path / "pr.png"
    status, out, err = compare(capsys, "--gold", gold_path, "--nbest", *paths, "--metrics", "p1", "--pr-curve", png,
                               "--json")
    assert status == 0, err
    curve = json.loads(out)["pr_curve"]
    assert curve["levels"] == [float(level) for level in LEVELS] and curve["path"] == str(png)
    assert list(curve["systems"]) == list(systems)
    for name, nbest in systems.items():
        assert curve["systems"][name] == pytest.approx(trec_eval_curve(gold, nbest), abs=1e-12), name
    assert_png(png)


def textbook_systems():
    """Baeza-Yates and Ribeiro-Neto's example as system "book" ({d3, d56, d129} at ranks 3, 8, 15 of 15),
    and "top": the three first."""
    gold = Gold([GoldPrompt("q", "x", (("d3", 1.0), ("d56", 1.0), ("d129", 1.0)))])
    book = [Hyp(f"n{i}") for i in range(1, 16)]
    book[2], book[7], book[14] = Hyp("d3"), Hyp("d56"), Hyp("d129")
    return gold, {"book": {"q": book}, "top": {"q": [Hyp("d3"), Hyp("d56"), Hyp("d129")]}}


@pytest.mark.parametrize("rule, expected", [
    ("exact", [1 / 3] * 4 + [0.25] * 3 + [0.2] * 4),  # the textbook's figure
    ("trec_eval", [1 / 3] * 4 + [0.25] * 4 + [0.2] * 3),  # (long)(0.7 * 3 + 0.9) is 2
])
def test_curve_follows_iprec_rule_on_the_textbook_example(tmp_path, capsys, rule, expected):
    gold, systems = textbook_systems()
    gold_path, paths = write_systems(tmp_path, gold, systems)
    status, out, err = compare(capsys, "--gold", gold_path, "--nbest", *paths, "--pr-curve", tmp_path / "pr.png",
                               "--iprec-rule", rule, "--metrics", "p1", "--json")
    assert status == 0, err
    result = json.loads(out)
    assert result["pr_curve"]["systems"] == {"book": pytest.approx(expected, abs=1e-12), "top": [1.0] * 11}
    assert f"|rule:{rule}|" in result["signatures"]["iprec0.7"]


def test_curve_from_a_saved_table_and_in_the_text_output(random_systems, tmp_path, capsys):
    _, systems, (gold_path, paths) = random_systems
    scores = tmp_path / "scores.json"
    status, out, _ = compare(capsys, "--gold", gold_path, "--nbest", *paths, "--metrics", "p1",
                             "--pr-curve", tmp_path / "a.png", "--write-scores", scores, "--json")
    assert status == 0
    scored = json.loads(out)["pr_curve"]["systems"]
    status, out, _ = compare(capsys, "--scores", scores, "--pr-curve", tmp_path / "b.png", "--json")
    assert status == 0 and json.loads(out)["pr_curve"]["systems"] == scored
    assert_png(tmp_path / "b.png")
    status, out, _ = compare(capsys, "--scores", scores, "--pr-curve", tmp_path / "c.png")
    rows = out.split("mean interpolated precision at each recall level -> ")[1].splitlines()[2:5]
    assert [row.split()[0] for row in rows] == list(systems)
    assert [float(v) for v in rows[0].split()[1:]] == pytest.approx(scored["listed"], abs=5e-5)


HAND_GOLD = Gold([GoldPrompt("p1", "a", (("a", 1.0), ("b", 1.0))), GoldPrompt("p2", "c", (("c", 1.0),)),
                  GoldPrompt("p3", "d", (("d", 1.0), ("e", 1.0), ("f", 1.0), ("g", 1.0))),
                  GoldPrompt("p4", "nil", ()), GoldPrompt("p5", "h", (("h", 1.0), ("i", 1.0), ("j", 1.0)))])


def lists(**by_prompt):
    return {pid: [Hyp(text) for text in texts.split()] for pid, texts in by_prompt.items()}


#: R-precision by hand: p1 1 vs 1/2, p2 0 vs 1, p3 2/4 vs 2/4, p4 no valid translation (no bar), p5 1 vs 1/3
HAND_SYSTEMS = {"b": lists(p1="x a", p2="c", p3="d e x z", p4="w", p5="h"),
                "a": lists(p1="a b", p2="x", p3="d x e y", p4="w", p5="h i j")}


def test_histogram_bars_are_the_hand_computed_rprec_differences(tmp_path, capsys):
    gold_path, paths = write_systems(tmp_path, HAND_GOLD, HAND_SYSTEMS)
    png = tmp_path / "hist.png"
    status, out, err = compare(capsys, "--gold", gold_path, "--nbest", *paths, "--paired", "t",
                               "--precision-histogram", png, "--metrics", "p1", "--json")
    assert status == 0, err
    bars = json.loads(out)["precision_histogram"]
    assert (bars["system"], bars["baseline"], bars["measure"]) == ("a", "b", "rprec")  # a minus the baseline
    assert bars["prompts"] == ["p5", "p1", "p3", "p2"]
    assert bars["differences"] == pytest.approx([2 / 3, 0.5, 0.0, -1.0], abs=1e-12)
    assert (bars["system_better"], bars["baseline_better"], bars["equal"]) == (2, 1, 1)
    assert_png(png)

    status, out, _ = compare(capsys, "--gold", gold_path, "--nbest", *paths, "--paired", "bs", "--baseline", "a",
                             "--precision-histogram", png, "--force", "--metrics", "p1")
    assert status == 0
    assert "rprec per prompt, b minus a, over 4 prompts: b better on 1, a better on 2, equal on 1" in out


def test_histogram_of_lists_scored_on_other_prompts_is_refused():
    scorer = Scorer(["rprec"])
    rows = [(p.id, scorer.prompt_stats(p, HAND_SYSTEMS["a"].get(p.id, []))) for p in HAND_GOLD]
    with pytest.raises(InputError, match="a and b were scored on different prompts"):
        precision_histogram(PerPrompt(scorer, rows, "a"), PerPrompt(scorer, rows[1:], "b"))


@pytest.mark.parametrize("paired, copies, got", [([], 0, 2), (["--paired", "bs"], 1, 3)])
def test_histogram_needs_paired_and_two_systems(tmp_path, capsys, paired, copies, got):
    gold_path, paths = write_systems(tmp_path, HAND_GOLD, HAND_SYSTEMS)
    status, _, err = compare(capsys, "--gold", gold_path, "--nbest", *paths, *paths[:copies], *paired,
                             "--precision-histogram", tmp_path / "h.png")
    assert status == 2, err
    assert ("--precision-histogram compares two systems prompt by prompt: give --paired bs|ar|t and two --nbest "
            f"files (got {got})") in err
    assert not (tmp_path / "h.png").exists()


def test_curve_needs_the_iprec_measures_in_a_table(tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    scores.write_text("system,map\na,0.5\nb,0.4\n")
    status, _, err = compare(capsys, "--scores", scores, "--pr-curve", tmp_path / "pr.png", "--heatmap",
                             tmp_path / "h.png")
    assert status == 2 and "scores.csv: --pr-curve: the systems table has no iprec0.0" in err, err
    assert not (tmp_path / "pr.png").exists() and not (tmp_path / "h.png").exists()


def test_new_outputs_are_checked_first_and_written_all_or_none(tmp_path, capsys, monkeypatch):
    gold_path, paths = write_systems(tmp_path, HAND_GOLD, HAND_SYSTEMS)
    argv = ["--gold", gold_path, "--nbest", *paths, "--metrics", "p1", "--paired", "t", "--heatmap",
            tmp_path / "heat.png", "--pr-curve", tmp_path / "pr.png", "--precision-histogram", tmp_path / "hist.png"]
    (tmp_path / "hist.png").write_text("mine")
    status, _, err = compare(capsys, *argv)
    assert status == 2 and "hist.png: already exists" in err
    assert (tmp_path / "hist.png").read_text() == "mine" and not (tmp_path / "heat.png").exists()

    from matplotlib.figure import Figure

    real = Figure.savefig

    def histogram_fails(fig, partial, **kwargs):
        if str(partial).endswith("hist.png"):
            raise OSError(28, "No space left on device")
        return real(fig, partial, **kwargs)

    monkeypatch.setattr(Figure, "savefig", histogram_fails)
    status, _, err = compare(capsys, *argv, "--force")
    assert status == 2 and "hist.png: cannot write: No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".png") == ["hist.png"]
    assert (tmp_path / "hist.png").read_text() == "mine"
