"""NBestEvalCallback(mode="async") on resume (issue 33): the trainer tells the sidecar when the checkpoint a
resume reads was written (the newest ``checkpoint-*`` folder's trainer_state.json), so that the queue can
be rewound to the step training resumes from (the rewind itself: tests/training/test_async_faults.py)."""

import os
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from nbest_eval.hf.async_train import _last_saved_at  # noqa: E402


def test_the_newest_checkpoint_s_state_says_when_it_was_saved(tmp_path):
    args = SimpleNamespace(save_strategy="steps", output_dir=str(tmp_path / "out"))
    written = _last_saved_at(args)
    assert written() is None  # no output folder yet
    for step, when in ((10, 1000.0), (20, 2000.0)):
        folder = tmp_path / "out" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text("{}")
        os.utime(folder / "trainer_state.json", (when, when))
    assert written() == 2000.0
    (tmp_path / "out" / "checkpoint-30").mkdir()  # being written: no state yet
    assert written() is None


def test_a_run_that_saves_no_checkpoint_holds_nothing(tmp_path):
    assert _last_saved_at(SimpleNamespace(save_strategy="no", output_dir=str(tmp_path))) is None
