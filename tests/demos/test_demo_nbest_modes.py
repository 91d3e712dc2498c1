"""The demo with --nbest-mode async and off: async validates by a sidecar and still writes the whole
report; off trains the very same model with no n-best validation (the same loss at every epoch) and
stops there; both record the training's wall time in summary.json, async each result's lag."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.training

pytest.importorskip("fairseq")


def demo(out, mode):
    result = subprocess.run([sys.executable, str(REPO / "examples" / "fairseq_demo.py"), "--fast", "--out", str(out),
                             "--nbest-mode", mode], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((out / "summary.json").read_text()), result.stdout


def test_async_reports_and_off_trains_the_same_model(tmp_path):
    asynchronous, said = demo(tmp_path / "async", "async")
    off, off_said = demo(tmp_path / "off", "off")
    assert (tmp_path / "async" / "REPORT.md").is_file() and "--nbest-mode async" in said
    assert not (tmp_path / "off" / "REPORT.md").exists() and "no n-best lists, so no report" in off_said

    assert asynchronous["sidecar_device"] == "cpu" and off["sidecar_device"] is None
    import torch

    auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert all((s["device"], s["precision"]) == (auto, "fp32") for s in (asynchronous, off))
    assert off["epochs_trained"] == 4 and all(t["training_seconds"] > 0 for t in (asynchronous, off))
    by_update = {row["update"]: row for row in off["validations"]}
    for row in asynchronous["validations"]:  # training does not depend on how it is validated
        assert row["loss"] == by_update[row["update"]]["loss"]
    evaluated = [row for row in asynchronous["validations"] if row["lag_seconds"] is not None]
    assert evaluated and evaluated == asynchronous["validations"][:len(evaluated)]  # none after a stop verdict
    assert all(row["lag_seconds"] > 0 and row["gen_seconds"] > 0 and row["lag_validations"] >= 0 for row in evaluated)
    lags = asynchronous["lags"]
    assert lags["evaluated"] == len(evaluated) and lags["lag_s_max"] == max(row["lag_seconds"] for row in evaluated)
    assert "train.log" in os.listdir(tmp_path / "off") and not (tmp_path / "off" / "nbest").exists()
