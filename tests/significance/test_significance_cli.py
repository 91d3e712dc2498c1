"""score --confidence, compare --paired and select's intervals, p-values and ties, end to end,
against sacrebleu's significance module (never against this code's own output)."""

import json
import os

import numpy as np
import pytest
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample, estimate_ci
from significance_cases import sacrebleu_inputs, systems, write_runs

from nbest_eval import Hyp
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest


@pytest.fixture
def one_best_systems(tmp_path):
    """A gold and three 1-best systems (tsv), and their sacrebleu inputs."""
    gold, lists = systems((3, 4, 5))
    write_gold(gold, tmp_path / "gold.txt")
    one_best = [{pid: hyps[:1] for pid, hyps in nbest.items()} for nbest in lists]
    for i, nbest in enumerate(one_best):
        write_nbest(nbest, tmp_path / f"s{i}.tsv", "tsv")
    return tmp_path, gold, one_best


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def sacrebleu_p_values(gold, lists, baseline, test):
    """sacrebleu's p-values of each other system against ``lists[baseline]``, in list order."""
    order = [baseline] + [i for i in range(len(lists)) if i != baseline]
    named = [(f"s{i}", sacrebleu_inputs(gold, lists[i])[0]) for i in order]
    _, results = PairedTest(named, {"BLEU": BLEU()}, sacrebleu_inputs(gold, lists[0])[1], test_type=test)()
    return {name: results["BLEU"][k].p_value for k, (name, _) in enumerate(named) if k}


def holm_by_hand(p):
    """Holm for two or three p-values, written out."""
    ranked = sorted(p, key=p.get)
    adjusted, running = {}, 0.0
    for rank, name in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - rank) * p[name]))
        adjusted[name] = running
    return adjusted


def test_score_confidence_equals_sacrebleu(one_best_systems, capsys):
    tmp, gold, lists = one_best_systems
    values = run_json(capsys, "score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "s0.tsv"), "--json",
                      "--metrics", "bleu_1x1,map", "--confidence")
    bleu = BLEU()
    hyps, refs = sacrebleu_inputs(gold, lists[0])
    _, resampled = _bootstrap_resample(bleu._extract_corpus_statistics(hyps, refs), bleu, 1000)
    mean, half_width = estimate_ci(np.array([s.score for s in resampled]))
    ci = values["bleu_1x1_ci"]
    assert ci["mean"] == pytest.approx(mean, abs=1e-5)
    assert (ci["high"] - ci["low"]) / 2 == pytest.approx(half_width, abs=1e-5)
    assert ci["low"] <= values["bleu_1x1"] <= ci["high"] and set(values["map_ci"]) == {"mean", "low", "high"}
    assert "|bs:1000|seed:12345|" in values["signatures"]["bleu_1x1"]


def test_score_confidence_table_and_seed(one_best_systems, capsys):
    tmp, _, _ = one_best_systems
    argv = ["score", "--gold", str(tmp / "gold.txt"), "--nbest", str(tmp / "s0.tsv"), "--metrics", "map",
            "--confidence", "--n-samples", "200", "--seed", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(μ = " in out and "95% CI [" in out and "|bs:200|seed:1|" in out
    assert main(argv[:-1] + ["2"]) == 0
    assert capsys.readouterr().out != out  # another seed, other draws


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_compare_paired_equals_sacrebleu(one_best_systems, capsys, test):
    tmp, gold, lists = one_best_systems
    result = run_json(capsys, "compare", "--gold", str(tmp / "gold.txt"), "--nbest",
                      *(str(tmp / f"s{i}.tsv") for i in range(3)), "--metrics", "bleu_1x1", "--paired", test,
                      "--baseline", "s1", "--json")
    expected = sacrebleu_p_values(gold, lists, 1, test)
    paired = result["paired"]
    assert paired["baseline"] == "s1" and paired["n_samples"] == {"bs": 1000, "ar": 10000}[test]
    assert {name: paired["systems"][name]["bleu_1x1"]["p_value"] for name in expected} == expected
    assert {name: paired["systems"][name]["bleu_1x1"]["p_holm"] for name in expected} == \
        pytest.approx(holm_by_hand(expected))
    assert f"|{test}:" in result["signatures"]["bleu_1x1"]


@pytest.mark.parametrize("argv, message", [
    (["--scores", "{tmp}/table.json", "--paired", "bs"], "--paired resamples prompts"),
    (["--gold", "{tmp}/gold.txt", "--nbest", "{tmp}/s0.tsv", "{tmp}/s1.tsv", "--paired", "bs", "--baseline", "nope"],
     "--baseline 'nope' is not a system; the systems are: s0, s1"),
    (["--gold", "{tmp}/gold.txt", "--nbest", "{tmp}/s0.tsv", "{tmp}/short.tsv", "--paired", "ar"],
     "short cannot be paired with s0: it has no list for 1 of s0's prompts (the first: prompt_0)"),
    (["--gold", "{tmp}/gold.txt", "--nbest", "{tmp}/s0.tsv", "{tmp}/s1.tsv", "--baseline", "s1"],
     "--baseline goes with --paired"),
])
def test_compare_paired_refuses(one_best_systems, capsys, argv, message):
    tmp, _, lists = one_best_systems
    (tmp / "table.json").write_text('{"systems": [{"name": "a", "values": {"map": 0.1}}, '
                                    '{"name": "b", "values": {"map": 0.2}}]}')
    write_nbest({pid: hyps for pid, hyps in lists[1].items() if pid != "prompt_0"}, tmp / "short.tsv", "tsv")
    assert main(["compare", *(a.format(tmp=tmp) for a in argv)]) == 2
    assert message in capsys.readouterr().err


def test_select_p_values_ties_and_pick_equal_sacrebleu(one_best_systems, capsys, monkeypatch):
    tmp, gold, lists = one_best_systems
    argv = ["select", "--from-nbest", *(str(tmp / f"s{i}.tsv") for i in range(3)), "--gold", str(tmp / "gold.txt"),
            "--metric", "bleu_1x1", "--metrics", "map", "--prefer", "earliest-tied", "--json",
            "--link-best", str(tmp / "picked")]
    table = run_json(capsys, *argv)
    best = table["best"]
    expected = sacrebleu_p_values(gold, lists, int(best[1]), "bs")
    rows = {s["name"]: s for s in table["systems"]}
    assert {f"{name}.tsv": p for name, p in expected.items()} == \
        {name: row["p_value"] for name, row in rows.items() if name != best}
    adjusted = holm_by_hand(expected)
    tied = [name for name in rows if name == best or adjusted[name[:-4]] >= 0.05]
    assert table["tied"] == tied and table["choice"] == tied[0]
    assert os.path.realpath(tmp / "picked") == str(tmp / tied[0])
    assert rows[best]["ci_low"] <= rows[best]["values"]["bleu_1x1"] <= rows[best]["ci_high"]
    assert "|bs:1000|seed:12345|" in table["signatures"]["bleu_1x1"]

    # a re-run resamples the cached per-prompt statistics: nothing is read or scored again
    from nbest_eval.cli import select_source

    monkeypatch.setattr(select_source, "read_nbest", lambda *a, **k: pytest.fail("read again"))
    assert run_json(capsys, *argv[:-2], "--link-best", str(tmp / "again")) == {**table}


@pytest.mark.parametrize("argv, message", [
    (["--alpha", "1.5"], "--alpha must be in (0, 1)"),
    (["--average", "2"], "--average K and --average-out PATH go together"),
    (["--average", "2", "--average-out", "{tmp}/avg"], "not for --from-nbest files"),
    (["--metric", "bleu_1x1", "--paired", "t"], "bleu_1x1 is no mean over prompts"),

])
def test_select_refuses(one_best_systems, capsys, argv, message):
    tmp, _, _ = one_best_systems
    assert main(["select", "--from-nbest", str(tmp / "s0.tsv"), str(tmp / "s1.tsv"), "--gold", str(tmp / "gold.txt"),
                 "--no-cache", *(a.format(tmp=tmp) for a in argv)]) == 2
    assert message in capsys.readouterr().err


def test_resamples_for_holm_by_hand():
    from nbest_eval.significance import resamples_for, resolution_note

    assert resamples_for(2) == 1000 and resamples_for(2, "ar") == 10000 and resamples_for(5, "t") == 0
    assert resamples_for(59) == 12000  # 10 x 59 / 0.05 = 11,800, in thousands
    assert resamples_for(59, "ar") == 12000 and resamples_for(59, alpha=0.01) == 59000
    assert resolution_note(59, 1000) and "--n-samples 12000" in resolution_note(59, 1000)
    assert resolution_note(59, 12000) is None and resolution_note(2, 1000) is None


def test_select_tells_many_checkpoints_apart(tmp_path, capsys):
    """60 checkpoints, the first 20 without any valid hypothesis: with 1,000 resamples Holm over 59
    comparisons could never reject (1/1001 x 59 > 0.05), and every checkpoint would look tied."""
    gold, lists = systems((3,))
    write_gold(gold, tmp_path / "gold.txt")
    valid = {p.id: [Hyp(p.translations[0][0], 0.0)] for p in gold}
    for epoch in range(1, 61):
        write_nbest(valid if epoch > 20 else {pid: [Hyp("x y z", 0.0)] for pid in valid}, tmp_path /
                    f"checkpoint{epoch}.tsv", "tsv")
    table = run_json(capsys, "select", "--from-nbest", str(tmp_path), "--gold", str(tmp_path / "gold.txt"),
                     "--metrics", "map", "--json", "--no-cache")
    assert table["n_samples"] == 12000 and "|bs:12000|seed:12345|" in table["signatures"]["map"]
    assert table["tied"] == [f"checkpoint{epoch}.tsv" for epoch in range(21, 61)]
    assert main(["select", "--from-nbest", str(tmp_path), "--gold", str(tmp_path / "gold.txt"), "--metrics", "map",
                 "--json", "--no-cache", "--n-samples", "1000"]) == 0
    out, err = capsys.readouterr()
    assert "no difference can be significant; use --n-samples 12000" in err
    assert len(json.loads(out)["tied"]) == 60


@pytest.mark.parametrize("command", [["score", "--confidence"], ["compare", "--paired", "bs"],
                                     ["select", "--no-cache"]])
@pytest.mark.parametrize("option, message", [(["--seed", "-1"], "argument --seed: expected an integer >= 0"),
                                             (["--n-samples", "99999999"], "at most 1000000")])
def test_resampling_options_are_checked_by_the_parser(one_best_systems, capsys, command, option, message):
    tmp, _, _ = one_best_systems
    two = [str(tmp / "s0.tsv"), str(tmp / "s1.tsv")]
    inputs = {"score": ["--nbest", two[0]], "compare": ["--nbest", *two], "select": ["--from-nbest", *two]}[command[0]]
    with pytest.raises(SystemExit) as exit:
        main([*command, "--gold", str(tmp / "gold.txt"), *inputs, *option])
    assert exit.value.code == 2 and message in capsys.readouterr().err


def _select(tmp, capsys, *extra):
    common = write_runs(tmp, 5)
    argv = ["select", "--from-nbest", tmp / "runs", "--metrics", "map", "--json", "--no-cache", *common, *extra]
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out), err


SIGNATURES = {  # select's options -> the resampling its signature must name (intervals are bootstrap draws)
    "bs": ([], "|bs:1000|seed:12345|"),
    "t: its intervals' draws and seed": (["--paired", "t"], "|t|bs:1000|seed:12345|"),
    "t with a seed": (["--paired", "t", "--seed", "7"], "|t|bs:1000|seed:7|"),
    "ar: its trials and its intervals' draws": (["--paired", "ar"], "|ar:10000|bs:1000|seed:12345|"),
    "bs with 39 resamples": (["--n-samples", "39"], "|bs:39|seed:12345|"),
}


@pytest.mark.parametrize("extra, expected", SIGNATURES.values(), ids=SIGNATURES.keys())
def test_select_signature_names_every_resampling_it_shows(tmp_path, capsys, extra, expected):
    table, err = _select(tmp_path, capsys, *extra)
    assert expected in table["signatures"]["map"]
    assert ("95% interval is just the range" in err) == ("39" in extra), err


FEW_RESAMPLES = {  # argv after the command's files -> whether the interval warning is due
    "score --confidence --n-samples 10": (["score", "--nbest", "{runs}/checkpoint1.tsv", "--confidence",
                                           "--n-samples", "10"], True),
    "score --confidence --n-samples 40": (["score", "--nbest", "{runs}/checkpoint1.tsv", "--confidence",
                                           "--n-samples", "40"], False),
    "compare --paired bs --n-samples 1": (["compare", "--nbest", "{runs}/checkpoint1.tsv", "{runs}/checkpoint2.tsv",
                                           "--paired", "bs", "--n-samples", "1"], True),
    "compare --paired ar --n-samples 1 (no interval)": (["compare", "--nbest", "{runs}/checkpoint1.tsv",
                                                         "{runs}/checkpoint2.tsv", "--paired", "ar", "--n-samples",
                                                         "1"], False),
}


@pytest.mark.parametrize("argv, warned", FEW_RESAMPLES.values(), ids=FEW_RESAMPLES.keys())
def test_too_few_resamples_for_an_interval_are_said(tmp_path, capsys, argv, warned):
    common = write_runs(tmp_path, 2)
    status = main([a.format(runs=tmp_path / "runs") for a in argv] + [str(a) for a in common] + ["--metrics", "map"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert ("95% interval is just the range" in err) == warned, err


def test_compare_paired_refuses_one_file_under_two_names(tmp_path, capsys):
    common = write_runs(tmp_path, 2)
    (tmp_path / "again.tsv").symlink_to(tmp_path / "runs" / "checkpoint1.tsv")
    status = main(["compare", "--nbest", str(tmp_path / "runs" / "checkpoint1.tsv"), str(tmp_path / "again.tsv"),
                   str(tmp_path / "runs" / "checkpoint2.tsv"), "--paired", "bs", *map(str, common)])
    err = capsys.readouterr().err
    assert status == 2 and "are one file" in err and "Traceback" not in err, err


def test_link_best_says_it_links_the_pick(tmp_path, capsys):
    table, err = _select(tmp_path, capsys, "--prefer", "earliest-tied", "--link-best", tmp_path / "best")
    assert table["choice"] != table["best"]  # else this test could not fail
    assert f"{tmp_path / 'best'}: link to {table['choice']}" in err, err
    assert (tmp_path / "best").resolve().name == table["choice"]
