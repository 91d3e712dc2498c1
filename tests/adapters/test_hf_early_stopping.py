"""NBestEarlyStoppingCallback in a real Seq2SeqTrainer: it stops when the rule stops, the Trainer's
best checkpoint is the one the rule keeps, and its state survives a resume. A frozen model (learning
rate 0) makes every evaluation the same, so what each rule does is known in advance. CPU, tiny T5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
import hf_toy as hf_demo  # noqa: E402  (examples/hf_toy.py)

EVAL_STEPS, PATIENCE = 2, 2


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory) -> Path:
    return hf_demo.ensure_synth(tmp_path_factory.mktemp("hf-stop") / "synth", seed=1, train_pairs=400,
                                valid_prompts=24)


def frozen_trainer(out: Path, data: Path, rule: str, max_steps: int):
    config = hf_demo.DemoConfig(output_dir=str(out), data=str(data), max_steps=max_steps, eval_steps=EVAL_STEPS,
                                patience=PATIENCE, stopping=rule, stopping_warmup=0, learning_rate=0.0,
                                warmup_steps=0, num_beams=4, eval_batch_size=8, batch_size=16, max_new_tokens=12,
                                metrics=("map", "bleu_1x1"), save_nbest=False)
    return hf_demo.make_trainer(config)


def kept_steps(trainer):
    return [e["eval_nbest_kept_step"] for e in trainer.state.log_history if "eval_map" in e]


@pytest.mark.parametrize("rule, kept", [("significant", EVAL_STEPS), ("strict", EVAL_STEPS * (1 + PATIENCE))])
def test_stops_and_the_best_checkpoint_is_the_kept_one(synth_dir, tmp_path, rule, kept):
    """Equal evaluations: both rules stop after 1 + PATIENCE; strict keeps the latest of equals (as
    fairseq's checkpoint_best.pt), significant the first (nothing is significantly better)."""
    trainer = frozen_trainer(tmp_path, synth_dir, rule, max_steps=40)
    trainer.train()
    stop = EVAL_STEPS * (1 + PATIENCE)
    assert trainer.state.global_step == stop
    steps = list(range(EVAL_STEPS, stop + 1, EVAL_STEPS))
    assert kept_steps(trainer) == [min(s, kept) if rule == "significant" else s for s in steps]
    assert Path(trainer.state.best_model_checkpoint) == tmp_path / f"checkpoint-{kept}"
    stopping = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))
    state_after_training = stopping.stopping_state
    trainer.evaluate()  # after training (the usual pattern): no new validation for the rule, no error
    assert stopping.stopping_state == state_after_training
    saved = json.loads((tmp_path / f"checkpoint-{stop}" / "trainer_state.json").read_text())
    state = saved["stateful_callbacks"]["NBestEarlyStoppingCallback"]["args"]["stopping_state"]
    assert state["seen"] == 1 + PATIENCE and state["kept_step"] == kept and state["stopped"]


def test_the_rule_state_survives_a_resume(synth_dir, tmp_path):
    """Two evaluations (kept, then one without improvement), then a resume: one more stops it."""
    first = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=2 * EVAL_STEPS)
    first.train()
    assert kept_steps(first) == [EVAL_STEPS, EVAL_STEPS]
    second = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=40)
    second.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{2 * EVAL_STEPS}"))
    assert second.state.global_step == EVAL_STEPS * (1 + PATIENCE)
    assert Path(second.state.best_model_checkpoint) == tmp_path / f"checkpoint-{EVAL_STEPS}"


def test_a_measure_the_nbest_callback_does_not_compute_is_refused(synth_dir, tmp_path):
    trainer = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=4)
    stopping = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))
    stopping.stopping = type(stopping.stopping)("wf1")
    with pytest.raises(ValueError, match="does not compute"):
        trainer.train()


@pytest.mark.parametrize("options, message", [
    (dict(patience=0), "patience must be"), (dict(alpha=1.5), "alpha must be"),
    (dict(rule="sometimes"), "unknown stopping rule"), (dict(warmup="later"), "warm-up must be")])
def test_bad_options_are_refused_at_creation(options, message):
    from nbest_eval.data import InputError

    with pytest.raises(InputError, match=message):
        hf.NBestEarlyStoppingCallback("map", **options)
