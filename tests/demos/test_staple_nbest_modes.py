"""scripts.staple_en_pt --nbest-mode loop|async|off on a small real run: async's rows are the loop's
values exactly (the same validations, the same kept epoch), the training is the same in all three
modes (the loss at every epoch), and summary.json says how long training took and how late each
async result came."""

import json

import pytest

from experiments.staple import cli, settings

pytestmark = pytest.mark.training


def run(staple_dir, out, framework, mode):
    # the analysis is the smoke test's (test_staple_en_pt.py); here the runs stop at summary.json
    extra = [] if mode == "off" else ["--patience", "1", "--stopping", "strict", "--no-analysis"]
    code = cli.main(["--data", str(staple_dir), "--out", str(out), "--framework", framework, "--nbest-mode", mode,
                     "--epochs", "3", "--train-prompts", "40", "--valid-prompts", "8", "--vocab-size", "300",
                     "--beam", "4", "--average", "2", *extra])
    assert code == 0
    return json.loads((out / "summary.json").read_text())


def loop_values(out, framework, summary):
    """The loop's values at full precision: fairseq's saved records (its log rounds), HF's log."""
    if framework == "hf":
        return {row["step"]: {k: row[k] for k in settings.METRICS} for row in summary["validations"]}
    records = [json.loads(p.read_text()) for p in (out / "nbest").glob("*.json")]
    return {r["num_updates"]: {k: r[k] for k in settings.METRICS} for r in records}


@pytest.mark.parametrize("framework", ["fairseq", "hf"])
def test_async_rows_are_the_loops_and_off_trains_the_same(staple_dir, framework, tmp_path, monkeypatch):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("fairseq" if framework == "fairseq" else "transformers")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    loop, asynchronous, off = (run(staple_dir, tmp_path / mode, framework, mode) for mode in ("loop", "async", "off"))

    expected = loop_values(tmp_path / "loop", framework, loop)
    rows = asynchronous["validations"]
    assert [r["step"] for r in rows] == [r["step"] for r in loop["validations"]]
    assert {r["step"]: {k: r[k] for k in settings.METRICS} for r in rows} == expected
    for row in rows:
        assert row["lag_seconds"] > 0 and row["lag_validations"] >= 0 and row["n_prompts"] == 8
        same = next(r for r in loop["validations"] if r["step"] == row["step"])
        assert open(row["nbest"], "rb").read() == open(same["nbest"], "rb").read()  # the lists, byte for byte
    assert asynchronous["early_stopping"]["kept"] == loop["early_stopping"]["kept"]

    losses = {mode: {r["step"]: r["loss"] for r in s["validations"]} for mode, s in
              (("loop", loop), ("off", off))}
    trained_async = {r["step"]: r["loss"] for r in rows}
    assert trained_async.items() <= losses["off"].items() and losses["loop"].items() <= losses["off"].items()

    timing = {mode: s["timing"] for mode, s in (("loop", loop), ("async", asynchronous), ("off", off))}
    assert [t["nbest_mode"] for t in timing.values()] == ["loop", "async", "off"]
    assert all(t["training_seconds"] > 0 for t in timing.values())
    assert timing["off"]["epochs_trained"] == 3 and "generation_seconds" not in timing["off"]
    assert timing["async"]["sidecar_device"] == "cpu" and timing["loop"]["sidecar_device"] is None
    assert timing["async"]["lag_seconds"]["max"] >= timing["async"]["lag_seconds"]["mean"] > 0
    assert off["selection"] == {} and off["agreement_with_map"] == {}
    # --no-analysis: summary.json without the selection, the plots or selection.txt; the sums and the share
    assert loop["selection"] == {} and not (tmp_path / "loop" / "selection.txt").exists()
    assert not list((tmp_path / "loop").glob("*.png")) and set(loop["agreement_with_map"]) >= {"bleu_1x1", "wf1"}
    generation = sum(row["gen_seconds"] for row in loop["validations"])
    assert timing["loop"]["generation_seconds"] == round(generation, 1)
    # of the training command's wall time (rounded to 0.1 s in summary.json)
    assert 0 < timing["loop"]["generation_share"] < 1
    assert abs(timing["loop"]["generation_share"] - generation / timing["loop"]["training_seconds"]) < 0.01
    import torch

    auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert all((s["device"], s["precision"]) == (auto, "fp32") for s in (loop, asynchronous, off))
    assert cli.main(["--data", str(staple_dir), "--out", str(tmp_path / "off"), "--analyse"]) == 2
