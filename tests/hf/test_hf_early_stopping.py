"""NBestEarlyStoppingCallback in a real Seq2SeqTrainer: it stops when the rule stops, the Trainer's
best checkpoint is the one the rule keeps, and its state survives a resume. A frozen model (learning
rate 0) makes every evaluation the same, so what each rule does is known in advance. CPU, tiny T5."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from transformers import TrainerCallback  # noqa: E402

from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.training.early_stopping import EarlyStopping  # noqa: E402

EVAL_STEPS, PATIENCE = 2, 2


def frozen_trainer(out: Path, data: Path, rule: str, max_steps: int, metrics=("map", "bleu_1x1"), **options):
    config = hf_demo.DemoConfig(output_dir=str(out), data=str(data), max_steps=max_steps, eval_steps=EVAL_STEPS,
                                patience=PATIENCE, stopping=rule, stopping_warmup=0, learning_rate=0.0,
                                warmup_steps=0, num_beams=4, eval_batch_size=8, batch_size=16, max_new_tokens=12,
                                metrics=metrics, save_nbest=False)
    return hf_demo.make_trainer(config, **options)


def stopping_callback(trainer):
    return next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))


def kept_steps(trainer):
    return [e["eval_nbest_kept_step"] for e in trainer.state.log_history if "eval_map" in e]


@pytest.mark.parametrize("rule", ["significant", "strict"])
def test_stops_and_the_best_checkpoint_is_the_kept_one(synth_dir, tmp_path, rule):
    """Equal evaluations: both rules stop after 1 + PATIENCE and keep the latest of the tied
    evaluations (strict as fairseq's checkpoint_best.pt; significant by the stated tie-break)."""
    trainer = frozen_trainer(tmp_path, synth_dir, rule, max_steps=40)
    trainer.train()
    stop = kept = EVAL_STEPS * (1 + PATIENCE)
    assert trainer.state.global_step == stop
    assert kept_steps(trainer) == list(range(EVAL_STEPS, stop + 1, EVAL_STEPS))
    assert Path(trainer.state.best_model_checkpoint) == tmp_path / f"checkpoint-{kept}"
    stopping = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))
    state_after_training = stopping.stopping_state
    trainer.evaluate()  # after training (the usual pattern): no new validation for the rule, no error
    assert stopping.stopping_state == state_after_training
    saved = json.loads((tmp_path / f"checkpoint-{stop}" / "trainer_state.json").read_text())
    state = saved["stateful_callbacks"]["NBestEarlyStoppingCallback"]["args"]["stopping_state"]
    assert state["seen"] == 1 + PATIENCE and state["kept_step"] == kept and state["stopped"]


def test_the_rule_state_survives_a_resume(synth_dir, tmp_path):
    """Two evaluations (kept, then one tied, without improvement), then a resume: one more stops it."""
    first = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=2 * EVAL_STEPS)
    first.train()
    assert kept_steps(first) == [EVAL_STEPS, 2 * EVAL_STEPS]
    second = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=40)
    second.train(resume_from_checkpoint=str(tmp_path / f"checkpoint-{2 * EVAL_STEPS}"))
    assert second.state.global_step == EVAL_STEPS * (1 + PATIENCE)
    assert Path(second.state.best_model_checkpoint) == tmp_path / f"checkpoint-{EVAL_STEPS * (1 + PATIENCE)}"


# -- a resume from a saved state that cannot be trusted (issue 34) ------------------------------------------------

BLEU = ("map", "bleu_1x1", "bleu_100x100")


@pytest.fixture(scope="module")
def first_run(synth_dir, tmp_path_factory):
    """Two evaluations of a frozen model under "significant", on map and on bleu_100x100: their folders."""
    runs = {}
    for key in ("map", "bleu_100x100"):
        out = tmp_path_factory.mktemp(f"first-{key}")
        trainer = frozen_trainer(out, synth_dir, "significant", max_steps=2 * EVAL_STEPS, metrics=BLEU)
        stopping_callback(trainer).stopping = EarlyStopping(key, "significant", PATIENCE, warmup=0)
        trainer.train()
        runs[key] = out
    return runs


def edit_state(**fields):
    def edit(entry):
        entry["args"]["stopping_state"].update(fields)
    return edit


def replace_entry(entry):
    entry.clear()
    entry["args"] = "abc"


RESUMED_FROM_A_BAD_STATE = {  # the first run, how its trainer_state.json is edited, the stopping measure on resume,
    # TrainingArguments -> what the one warning says
    "kept_step 999": ("map", edit_state(kept_step=999), "map", {},
                      "kept_step 999 is not a step from 0 to the current 4"),
    "kept_step -7": ("map", edit_state(kept_step=-7), "map", {}, "kept_step -7 is not a step"),
    "runs -100": ("map", edit_state(runs=-100), "map", {}, "runs -100"),
    "a NaN best": ("map", edit_state(reference_value=float("nan"), kept_value=float("nan")), "map", {},
                   "reference_value nan"),
    "an edited best": ("map", edit_state(reference_value=0.99, kept_value=0.99), "map", {},
                       "reference_value 0.99 is not its statistics' map"),
    "a 400-digit integer": ("map", edit_state(seen=10 ** 400), "map", {}, "seen 10000000000"),
    "a non-dict entry": ("map", replace_entry, "map", {}, "is {'args': 'abc'}, not"),
    "a bleu_100x100 state on bleu_1x1": ("bleu_100x100", lambda entry: None, "bleu_1x1", {},
                                         "it is a state for 'bleu_100x100', not bleu_1x1"),
    "a damaged state the Trainer rebuilds the callback from": (
        "map", edit_state(runs="abc"), "map", {"restore_callback_states_from_checkpoint": True}, "runs 'abc'"),
}


@pytest.mark.parametrize("run, edit, key, overrides, message", RESUMED_FROM_A_BAD_STATE.values(),
                         ids=RESUMED_FROM_A_BAD_STATE.keys())
def test_a_resume_from_a_bad_state_warns_once_and_counts_afresh(synth_dir, first_run, tmp_path, caplog, run, edit, key,
                                                                 overrides, message):
    """The frozen model evaluates alike at every step: counting from a fresh state the rule sees 1 +
    PATIENCE evaluations after the resume and keeps the last; a bad state adopted would count on from
    the saved one (or from its lies: a bleu_100x100 reference read as bleu_1x1 "improves")."""
    import shutil

    shutil.copytree(first_run[run], tmp_path, dirs_exist_ok=True)
    resume_from = tmp_path / f"checkpoint-{2 * EVAL_STEPS}"
    path = resume_from / "trainer_state.json"
    saved = json.loads(path.read_text())
    edit(saved["stateful_callbacks"]["NBestEarlyStoppingCallback"])
    path.write_text(json.dumps(saved))
    trainer = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=40, metrics=BLEU, **overrides)
    stopping_callback(trainer).stopping = EarlyStopping(key, "significant", PATIENCE, warmup=0)
    with caplog.at_level(logging.WARNING, logger="nbest_eval.hf.early_stopping"):
        trainer.train(resume_from_checkpoint=str(resume_from))
    warned = [r.getMessage() for r in caplog.records if r.name == "nbest_eval.hf.early_stopping"]
    assert len(warned) == 1 and message in warned[0], warned
    stop = 2 * EVAL_STEPS + EVAL_STEPS * (1 + PATIENCE)
    state = stopping_callback(trainer).stopping_state
    assert (trainer.state.global_step, state.seen, state.kept_step) == (stop, 1 + PATIENCE, stop)
    assert Path(trainer.state.best_model_checkpoint) == tmp_path / f"checkpoint-{stop}"


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


class LogRecorder(TrainerCallback):
    """Stands in for a reporter: the logs on_log received."""

    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


def test_every_decision_is_on_the_console_at_default_logging(synth_dir, tmp_path, capsys):
    """At transformers' default verbosity: each evaluation's console line and every reporter get
    eval_nbest_kept_step, the verdict follows it, and the end of training says what was kept and why."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_warning()  # the default
    recorder = LogRecorder()
    trainer = frozen_trainer(tmp_path, synth_dir, "significant", max_steps=40, extra_callbacks=[recorder])
    trainer.nbest.print_samples = 2
    trainer.train()
    lines = capsys.readouterr().out.splitlines()
    evaluated = [i for i, line in enumerate(lines) if "'eval_map'" in line]
    steps = list(range(EVAL_STEPS, EVAL_STEPS * (1 + PATIENCE) + 1, EVAL_STEPS))
    assert len(evaluated) == len(steps)
    for n, (i, step) in enumerate(zip(evaluated, steps), 1):
        assert "'eval_nbest_kept_step'" in lines[i]
        verdict = f"n-best early stopping at step {step}: significant on map: validation {n} "
        assert lines[i + 1].startswith(verdict), lines[i + 1]
        assert lines[i + 1].endswith(f"; keeping step {step}")
        assert ("; stop;" in lines[i + 1]) == (step == steps[-1])
    assert [log["eval_nbest_kept_step"] for log in recorder.logs if "eval_map" in log] == steps
    assert lines[-1] == (f"n-best early stopping: significant on map: kept validation 3 (step {steps[-1]}, map 0), "
                         f"the latest validation tied with validation 1 (ties keep the latest); stopped after "
                         f"validation 3")
    first = trainer.nbest.evaluator.prompts[0]
    samples = [i for i, line in enumerate(lines) if line.startswith("n-best samples at step ")]
    assert samples == [i + 2 for i in evaluated]  # after the metrics line (and the verdict: listed first)
    assert [lines[i] for i in samples] == [f"n-best samples at step {s} (2 of 40 prompts; * a valid translation):"
                                           for s in steps]
    assert lines[samples[0] + 1] == f"  {first.id}: {first.text}"


def test_while_tied_the_latest_step_is_loaded_and_the_end_says_warm_up(synth_dir, tmp_path, capsys):
    """MAP tied at every evaluation (a frozen model) under the default rule and warm-up: the rule never
    leaves warm-up, and load_best_model_at_end with nbest_kept_step loads the latest step, not the first."""
    config = hf_demo.DemoConfig(output_dir=str(tmp_path), data=str(synth_dir), max_steps=3 * EVAL_STEPS,
                                eval_steps=EVAL_STEPS, patience=PATIENCE, stopping="proportional", learning_rate=0.0,
                                warmup_steps=0, num_beams=4, eval_batch_size=8, batch_size=16, max_new_tokens=12,
                                metrics=("map",), save_nbest=False)
    trainer = hf_demo.make_trainer(config)
    trainer.train()
    assert kept_steps(trainer) == [EVAL_STEPS, 2 * EVAL_STEPS, 3 * EVAL_STEPS]
    assert trainer.args.load_best_model_at_end and trainer.args.metric_for_best_model == "nbest_kept_step"
    assert Path(trainer.state.best_model_checkpoint) == tmp_path / f"checkpoint-{3 * EVAL_STEPS}"
    end = capsys.readouterr().out.splitlines()[-1]
    assert end.startswith(f"n-best early stopping: proportional on map: kept validation 3 (step {3 * EVAL_STEPS}, ")
    assert end.endswith("; 3 validation(s), no stop; the rule never left warm-up (no validation was "
                        "significantly better than the first)")


@pytest.mark.parametrize("metric, name", [("map", None), ("eval_map", None), ("eval_staple_map", "staple"),
                                          ("map", "staple")])
def test_the_measure_may_be_named_as_logged(metric, name):
    """As metric_for_best_model, the measure may be given as the key the Trainer logs."""
    stopping = hf.NBestEarlyStoppingCallback(metric, name=name)
    assert stopping.stopping.key == "map" and stopping.state()["args"]["metric"] == "map"
