"""Hostile input, third pass (issue 22): resampling past memory, numbers that say less than they
should, and the significance API given the wrong things. Each class of case is a table; the numbers
are checked against sacrebleu or numpy's own one-shot draws, never against this code's output."""

import json
import re

import numpy as np
import pytest
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample, estimate_ci
from test_significance import per_prompt, sacrebleu_inputs, systems

from nbest_eval import InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.significance import ar_swaps, bootstrap_draws, confidence_intervals, paired_test
from nbest_eval.significance import resampling as resampling_module

# --- class 3: resampling in bounded chunks gives sacrebleu's draws, or is refused up front ------------------

CHUNKINGS = {  # (prompts, resamples, seed, CHUNK_BYTES): chunks of rows that divide the resamples or not
    "one row per chunk": (7, 50, 3, 1),
    "chunks of 5 rows, a short last one": (7, 53, 12345, 24 * 7 * 5),
    "an odd prompt count": (33, 1000, 12345, 24 * 33 * 13),
    "one chunk": (15, 200, 0, 1 << 26),
    "a single prompt": (1, 97, 5, 24 * 3),
}


@pytest.mark.parametrize("n, samples, seed, chunk", CHUNKINGS.values(), ids=CHUNKINGS.keys())
def test_chunked_draws_are_sacrebleus_one_shot_draws(monkeypatch, n, samples, seed, chunk):
    monkeypatch.setattr(resampling_module, "CHUNK_BYTES", chunk)
    indices = np.random.default_rng(seed).choice(n, size=(samples, n), replace=True)
    assert bootstrap_draws(n, samples, seed).tolist() == [np.bincount(r, minlength=n).tolist() for r in indices]
    swaps = np.random.default_rng(seed).integers(2, size=(samples, n), dtype=bool)
    assert np.array_equal(ar_swaps(n, samples, seed), swaps)


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_chunked_tests_and_intervals_equal_sacrebleu(monkeypatch, test):
    monkeypatch.setattr(resampling_module, "CHUNK_BYTES", 24 * 120 * 37)  # 37 rows (AR: 32) per chunk
    gold, lists = systems()
    scorer = Scorer(["bleu_1x1"])
    base, other = per_prompt(scorer, gold, lists[0], "base"), per_prompt(scorer, gold, lists[1], "s0")
    ours = paired_test(base, [other], test)["s0"]["bleu_1x1"]
    named = [("base", sacrebleu_inputs(gold, lists[0])[0]), ("s0", sacrebleu_inputs(gold, lists[1])[0])]
    _, results = PairedTest(named, {"BLEU": BLEU()}, sacrebleu_inputs(gold, lists[0])[1], test_type=test)()
    assert ours.p_value == results["BLEU"][1].p_value
    bleu = BLEU()
    hyps, refs = sacrebleu_inputs(gold, lists[0])
    _, resampled = _bootstrap_resample(bleu._extract_corpus_statistics(hyps, refs), bleu, 1000)
    mean, half_width = estimate_ci(np.array([s.score for s in resampled]))
    found = confidence_intervals(base)["bleu_1x1"]
    assert (found.mean, found.half_width) == pytest.approx((mean, half_width), abs=1e-5)


def _runs(tmp, count):
    gold, lists = systems((3, 4, 5))
    write_gold(gold, tmp / "gold.txt")
    (tmp / "runs").mkdir()
    for i in range(count):
        write_nbest(lists[i % 3], tmp / "runs" / f"checkpoint{i + 1}.tsv", "tsv")
    return ["--gold", tmp / "gold.txt"]


MEMORY = {  # argv -> what the refusal names; each would need far more than RESULT_BYTES
    "select --alpha 1e-7 over 5 checkpoints": (["select", "--from-nbest", "{runs}", "--alpha", "1e-7"],
                                                "--alpha 1e-07 over 5 checkpoints"),
    "select --alpha 5e-324 (subnormal)": (["select", "--from-nbest", "{runs}", "--alpha", "5e-324"],
                                           "infinitely many resamples"),
    "select --paired ar --alpha 1e-6": (["select", "--from-nbest", "{runs}", "--paired", "ar", "--alpha", "1e-6"],
                                         "GiB"),
}


@pytest.mark.parametrize("argv, message", MEMORY.values(), ids=MEMORY.keys())
def test_resampling_past_memory_is_refused_before_scoring(tmp_path, capsys, argv, message):
    common = _runs(tmp_path, 5)
    status = main([str(a).format(runs=tmp_path / "runs") for a in argv + common + ["--no-cache", "--json"]])
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err, err


API_MEMORY = {
    "paired_test with a billion resamples": lambda base, other: paired_test(base, [other], "bs", 10 ** 9),
    "paired_test ar with a billion trials": lambda base, other: paired_test(base, [other], "ar", 10 ** 9),
    "confidence_intervals with 10**12 resamples": lambda base, other: confidence_intervals(base, 10 ** 12),
    "bootstrap_draws of 10**8 x 120": lambda base, other: bootstrap_draws(120, 10 ** 8),
}


@pytest.mark.parametrize("call", API_MEMORY.values(), ids=API_MEMORY.keys())
def test_api_resampling_past_memory_is_an_input_error(call):
    gold, lists = systems()
    scorer = Scorer(["map"])
    with pytest.raises(InputError, match="GiB"):
        call(per_prompt(scorer, gold, lists[0], "base"), per_prompt(scorer, gold, lists[1], "s0"))


def test_select_resamples_a_large_alpha_in_chunks(tmp_path, capsys, monkeypatch):
    """--alpha 0.001 over 5 checkpoints: 40,000 resamples, drawn 64 rows at a time, and the same
    result as one draw of them all."""
    common = _runs(tmp_path, 5)
    argv = ["select", "--from-nbest", str(tmp_path / "runs"), "--alpha", "0.001", "--metrics", "map", "--json",
            "--no-cache", *map(str, common)]
    assert main(argv) == 0
    whole = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(resampling_module, "CHUNK_BYTES", 24 * 120 * 64)
    assert main(argv) == 0
    chunked = json.loads(capsys.readouterr().out)
    assert whole["n_samples"] == 40000 and chunked == whole


# --- class 5: numbers that say what they depend on; the API refuses what it cannot take ----------------------

def _select(tmp, capsys, *extra):
    common = _runs(tmp, 5)
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
    common = _runs(tmp_path, 2)
    status = main([a.format(runs=tmp_path / "runs") for a in argv] + [str(a) for a in common] + ["--metrics", "map"])
    err = capsys.readouterr().err
    assert status == 0, err
    assert ("95% interval is just the range" in err) == warned, err


def test_compare_paired_refuses_one_file_under_two_names(tmp_path, capsys):
    common = _runs(tmp_path, 2)
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


def _api_systems():
    gold, lists = systems()
    scorer = Scorer(["map", "rr"])
    return gold, lists, per_prompt(scorer, gold, lists[0], "base"), per_prompt(scorer, gold, lists[1], "s0")


def _select_api(base, other, key):
    from nbest_eval.selection import select
    return select([base, other], key)


def _judge(base, other, key, test):
    from nbest_eval.selection import judge_against_best
    return judge_against_best([base, other], 0, key, test)


def _other_scorer(base, other):
    gold, lists = systems()[:2]
    return paired_test(base, [per_prompt(Scorer(["map", "p1"]), gold, lists[1], "t0")])


def _holm(values):
    from nbest_eval.significance import holm
    return lambda base, other: holm(values)


API = {  # a call on (baseline, other) -> what the InputError says
    "paired_test given one system, not a list": (lambda b, o: paired_test(b, o), "list of PerPrompt"),
    "paired_test given a dict as a system": (lambda b, o: paired_test(b, [{"map": 0.5}]), "must be a PerPrompt"),
    "paired_test given a string of keys": (lambda b, o: paired_test(b, [o], keys="map"), "list of measure keys"),
    "paired_test given an unknown key": (lambda b, o: paired_test(b, [o], keys=["bleu"]), "unknown measure 'bleu'"),
    "paired_test given no keys": (lambda b, o: paired_test(b, [o], keys=[]), "non-empty list"),
    "paired_test given 2.5 resamples": (lambda b, o: paired_test(b, [o], n_samples=2.5), "integer >= 1"),
    "paired_test given 0 resamples": (lambda b, o: paired_test(b, [o], "ar", n_samples=0), "integer >= 1"),
    "paired_test given a negative seed": (lambda b, o: paired_test(b, [o], seed=-1), "seed"),
    "paired_test given a string seed": (lambda b, o: paired_test(b, [o], seed="12345"), "seed"),
    "paired_test over two scorers": (_other_scorer, "different measures or options"),
    "confidence_intervals given a dict": (lambda b, o: confidence_intervals({"map": b}), "must be a PerPrompt"),
    "confidence_intervals given an unknown key": (lambda b, o: confidence_intervals(b, keys=["p1"]), "unknown"),
    "holm given NaN": (_holm([0.1, float("nan")]), "a p-value must be"),
    "holm given 1.5": (_holm([1.5]), "a p-value must be"),
    "holm given a string": (_holm(["0.01"]), "a p-value must be"),
    "select given an unknown key": (lambda b, o: _select_api(b, o, "bleu_1x1"), "unknown measure"),
    "judge_against_best t on an unknown key": (lambda b, o: _judge(b, o, "nope", "t"), "unknown measure"),
}


@pytest.mark.parametrize("call, message", API.values(), ids=API.keys())
def test_significance_api_refuses_what_it_cannot_take(call, message):
    _, _, base, other = _api_systems()
    with pytest.raises(InputError, match=re.escape(message)):
        call(base, other)
