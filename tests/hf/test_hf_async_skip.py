"""NBestEvalCallback(mode="async", async_skip=True) in a real run (issue 33): a tiny T5 hands off to a
sidecar made slow (the NBEST_EVAL_SIDECAR_DELAY test hook), so older waiting snapshots are skipped.
The evaluated ones give the loop's values at their steps, and the verdict and kept model are the
rule's replayed over the evaluated evaluations only (the loop's values at those steps). CPU only."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")

from transformers import TrainerCallback  # noqa: E402

from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.cli.watch import DELAY_ENV  # noqa: E402
from nbest_eval.training.early_stopping import EarlyStopping  # noqa: E402
from nbest_eval.training.handoff import SKIPPED, Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EVAL_STEPS, MAX_STEPS = 10, 120
#: the async run's rule: strict patience 1 on 1-best BLEU (MAP is still 0 this early) after 2 evaluations
RULE = EarlyStopping("bleu_1x1", "strict", patience=1, warmup=2)
DELAY_S = 1.5  # per evaluation: a few evaluation intervals of the paced run, so snapshots wait and are skipped
STEP_S = 0.05  # slept per training step in async mode


class Paced(TrainerCallback):
    """Holds the first step until the sidecar beats (it loads for seconds, the tiny run's training
    takes about as long), then sleeps STEP_S per step."""

    def __init__(self, queue: Queue):
        self.queue, self.ready = queue, False

    def on_step_begin(self, args, state, control, **kwargs):
        deadline = time.monotonic() + 120
        while not self.ready and not glob.glob(self.queue.path("sidecars", "*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.ready = True
        time.sleep(STEP_S)


def skip_trainer(out, data, mode: str, rule: EarlyStopping):
    """The tiny T5 of test_hf_async.py; in async mode with async_skip (DemoConfig has no field for it),
    an external sidecar and paced training (:class:`Paced`)."""
    config = hf_demo.DemoConfig(output_dir=str(out), data=str(data), max_steps=MAX_STEPS, eval_steps=EVAL_STEPS,
                                stopping="strict", learning_rate=1e-2, warmup_steps=0, num_beams=4,
                                eval_batch_size=8, batch_size=16, max_new_tokens=12, metrics=("map", "bleu_1x1"),
                                save_nbest=False, eval_prompts=24, nbest_mode=mode, async_device="external")
    paced = [Paced(Queue(out))] if mode == "async" else []
    trainer = hf_demo.make_trainer(config, extra_callbacks=paced)
    stopping = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))
    stopping.stopping = rule
    if mode == "async":
        trainer.nbest.handoff.skip = True
    return trainer


@pytest.fixture(scope="module")
def hf_unstopped_loop_run(synth_dir, tmp_path_factory):
    """The loop run to MAX_STEPS (a patience it never runs out of): every evaluation's values."""
    trainer = skip_trainer(tmp_path_factory.mktemp("skip-loop"), synth_dir, "loop",
                           EarlyStopping(RULE.key, RULE.rule, patience=MAX_STEPS, warmup=RULE.warmup))
    trainer.train()
    assert trainer.state.global_step == MAX_STEPS
    return {e["step"]: e for e in trainer.state.log_history if "eval_bleu_1x1" in e}


def test_skipped_evaluations_are_recorded_and_the_verdict_is_the_rules_over_the_evaluated(
        synth_dir, tmp_path, hf_unstopped_loop_run):
    loop = hf_unstopped_loop_run
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", DELAY_ENV: str(DELAY_S)}
    watcher = subprocess.Popen([sys.executable, "-m", "nbest_eval", "watch", str(tmp_path / "async"), "--poll", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:  # started first: it waits for the run's manifest
        run = skip_trainer(tmp_path / "async", synth_dir, "async", RULE)
        run.train()
        out, _ = watcher.communicate(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0, out
    queue = Queue(tmp_path / "async")
    results = list(queue.results().values())
    steps = [result["tags"]["step"] for result in results]
    assert steps == list(range(EVAL_STEPS, run.state.global_step + 1, EVAL_STEPS))  # each evaluation, once
    skipped = [result for result in results if "skipped" in result]
    evaluated = [result for result in results if "values" in result]
    assert skipped and all(result["skipped"] == SKIPPED for result in skipped)
    assert len(evaluated) > RULE.warmup  # enough for the rule to stop
    for result in evaluated:  # the loop's values at the same step
        expected = loop[result["tags"]["step"]]
        assert {key: result["values"][key] for key in ("map", "bleu_1x1")} == \
            {"map": expected["eval_map"], "bleu_1x1": expected["eval_bleu_1x1"]}, result["tags"]
    decisions, stop = RULE.replay([loop[r["tags"]["step"]]["eval_bleu_1x1"] for r in evaluated])
    verdict = queue.read_verdict()
    assert verdict["validations"] == len(decisions) == len(evaluated)  # none evaluated after the stop
    assert verdict["stop"] == (stop is not None)
    kept = evaluated[decisions[-1].kept]["tags"]["step"]
    assert verdict["kept"]["step"] == kept == run.state.best_global_step
    _, loop_stop = RULE.replay([entry["eval_bleu_1x1"] for _, entry in sorted(loop.items())])
    if stop is not None:  # no earlier in steps than the loop's stop (the rule over every evaluation)
        assert loop_stop is not None and evaluated[stop]["tags"]["step"] >= sorted(loop)[loop_stop]
    if run.state.global_step < MAX_STEPS:  # only the verdict ends training early (once it arrives)
        assert stop is not None
