"""`scripts.bench --only generation` on what the two runs recorded (issue 30): an --epoch a run did not
validate is a clean error naming the run and its epochs, and the HF checkpoint generates in the
precision its run recorded unless --precision is given, and says which."""

import json

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
pytest.importorskip("fairseq")
import nbest_eval.fairseq.checkpoints as fairseq_checkpoints  # noqa: E402
from experiments import hf_toy  # noqa: E402
from experiments.bench import main  # noqa: E402
from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.formats import write_gold  # noqa: E402
from nbest_eval.hf import settings as hf_settings  # noqa: E402


@pytest.fixture
def bench_runs(tmp_path):
    """A fairseq and an HF run's summary.json, validated at epochs 1-3, each HF checkpoint with the
    callback's record of generating in bf16 (no weights: the generation is faked)."""
    corpus = generate(seed=1, train_pairs=20, valid_prompts=3)
    gold = tmp_path / "gold.txt"
    write_gold(corpus.gold, gold)
    tok = hf_toy.build_tokenizer([text for pair in corpus.train for text in pair])
    evaluator = hf.NBestEvaluator(gold, tok, num_beams=2, max_new_tokens=4, precision="bf16", metrics=["map"])
    runs = []
    for framework in ("fairseq", "hf"):
        run = tmp_path / framework
        validations = []
        for epoch in (1, 2, 3):
            checkpoint = run / f"checkpoint{epoch}"
            checkpoint.mkdir(parents=True)
            if framework == "hf":
                hf_settings.save_settings(checkpoint, evaluator)
            validations.append({"epoch": epoch, "checkpoint": str(checkpoint), "gen_seconds": 1.0})
        summary = {"framework": framework, "valid_gold": str(gold), "validations": validations, "beam": 2,
                   "device": "cpu"}
        (run / "summary.json").write_text(json.dumps(summary))
        runs.append(str(run))
    return runs


@pytest.fixture
def generated(monkeypatch):
    """Each checkpoint_nbest call's (checkpoint, keyword arguments), the lists empty."""
    calls = []

    def fake(path, gold, **settings):
        calls.append((path, settings))
        return {}

    monkeypatch.setattr(hf, "checkpoint_nbest", fake)
    monkeypatch.setattr(fairseq_checkpoints, "checkpoint_nbest", fake)
    return calls


def _bench(*argv):
    return main(["--only", "generation", "--repeat", "1", "--device", "cpu", *argv])


def test_an_epoch_a_run_did_not_validate_names_the_run_and_its_epochs(bench_runs, generated, capsys):
    with pytest.raises(SystemExit) as exit:
        _bench("--runs", *bench_runs, "--epoch", "7")
    assert exit.value.code == f"bench: --epoch 7: {bench_runs[0]} validated epochs 1, 2, 3 only"
    assert generated == []


def test_the_hf_side_generates_in_the_recorded_precision(bench_runs, generated, capsys):
    assert _bench("--runs", *bench_runs) is None
    out = capsys.readouterr().out
    hf_calls = [settings for path, settings in generated if "/hf/" in path]
    assert hf_calls and {settings["precision"] for settings in hf_calls} == {"bf16"}
    assert {path for path, _ in generated} == {f"{run}/checkpoint3" for run in bench_runs}
    assert "HF on cpu in bf16 (the HF run's record; " in out


def test_precision_given_overrides_the_record_and_is_said(bench_runs, generated, capsys):
    assert _bench("--runs", *bench_runs, "--epoch", "2", "--precision", "fp32") is None
    out = capsys.readouterr().out
    assert {settings["precision"] for path, settings in generated if "/hf/" in path} == {"fp32"}
    assert "HF on cpu in fp32 (--precision; " in out
