"""Where the HF child sidecar writes its TensorBoard scalars: the Trainer's own TensorBoard folder,
only when the Trainer reports to TensorBoard."""

from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from nbest_eval.hf.async_train import tensorboard_logdir  # noqa: E402


def test_the_sidecar_writes_where_the_trainer_reports(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    out = str(tmp_path)
    assert tensorboard_logdir(SimpleNamespace(report_to=["none"], output_dir=out)) is None
    assert tensorboard_logdir(SimpleNamespace(report_to=["tensorboard"], output_dir=out)) == f"{out}/runs"
    assert tensorboard_logdir(SimpleNamespace(report_to=["tensorboard"], output_dir=out, logging_dir="tb")) == "tb"
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "/elsewhere")
    assert tensorboard_logdir(SimpleNamespace(report_to=["tensorboard"], output_dir=out)) == "/elsewhere"
