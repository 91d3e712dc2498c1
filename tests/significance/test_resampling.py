"""Resampling within memory: draws made in bounded chunks are sacrebleu's (numpy's one-shot draws)
and give sacrebleu's p-values and intervals; a resampling past memory is refused up front, by the
commands and by the API."""

import json

import numpy as np
import pytest
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest, _bootstrap_resample, estimate_ci
from significance_cases import per_prompt, sacrebleu_inputs, systems, write_runs

from nbest_eval import InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.significance import ar_swaps, bootstrap_draws, confidence_intervals, paired_test
from nbest_eval.significance import resampling as resampling_module

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
    common = write_runs(tmp_path, 5)
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
    common = write_runs(tmp_path, 5)
    argv = ["select", "--from-nbest", str(tmp_path / "runs"), "--alpha", "0.001", "--metrics", "map", "--json",
            "--no-cache", *map(str, common)]
    assert main(argv) == 0
    whole = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(resampling_module, "CHUNK_BYTES", 24 * 120 * 64)
    assert main(argv) == 0
    chunked = json.loads(capsys.readouterr().out)
    assert whole["n_samples"] == 40000 and chunked == whole
