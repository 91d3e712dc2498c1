"""NBestEvalCallback(mode="async") (issue 33): the sidecar's HFSnapshotEvaluator gives the loop's
values, rows and lists for the same weights; a tiny run in async mode gives the loop's per-evaluation
measures, stop verdict and kept weights. CPU, tiny T5, the synthetic corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
import torch  # noqa: E402

from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.analysis.synth import GOLD_FILE  # noqa: E402
from nbest_eval.formats import save_nbest  # noqa: E402
from nbest_eval.hf.async_eval import TOKENIZER, HFSnapshotEvaluator  # noqa: E402
from nbest_eval.hf.settings import settings_of  # noqa: E402
from nbest_eval.training.early_stopping import EarlyStopping  # noqa: E402
from nbest_eval.training.handoff import Queue  # noqa: E402
from nbest_eval.training.handoff_files import Tags  # noqa: E402
from nbest_eval.training.trainer_side import new_manifest  # noqa: E402

EVAL_STEPS, MAX_STEPS, PATIENCE = 10, 300, 1


def test_the_snapshot_evaluator_gives_the_loops_values_rows_and_lists(synth_dir, tmp_path):
    """An untrained tiny T5 saved as a snapshot: the evaluator rebuilt from the manifest scores it as
    the loop's evaluator scores the model in memory, bit for bit."""
    pairs = hf_demo.load_pairs(synth_dir, "train") + hf_demo.load_pairs(synth_dir, "valid")
    tokenizer = hf_demo.build_tokenizer([s for pair in pairs for s in pair])
    model = hf_demo.build_model(tokenizer, seed=3)
    loop = hf.NBestEvaluator(synth_dir / GOLD_FILE, tokenizer, synth_dir / "valid.src", num_beams=4,
                             max_new_tokens=10, batch_size=8, subset_size=30, metrics="map,bleu_1x1,wf1")
    expected = loop.evaluate(model, gather_nbest=True)
    queue = Queue(tmp_path)
    queue.create()
    tokenizer.save_pretrained(queue.path(TOKENIZER))
    manifest = new_manifest("hf", loop.full_gold.path, loop.full_gold.digest(), settings_of(loop), None, 2, False,
                            dtype="float32", save_lists={"dir": str(tmp_path / "lists"), "format": "tsv",
                                                         "name": None})
    entry = queue.put(model.save_pretrained, Tags(None, 0, 7, "s"))
    evaluator = HFSnapshotEvaluator(manifest, queue)
    try:
        found = evaluator.evaluate(entry.path, entry.tags)
    finally:
        evaluator.close()
    assert found.values == expected.values and dict(found.stats) == dict(expected.stats)
    assert found.per_prompt.ids == expected.per_prompt.ids
    assert np.array_equal(found.per_prompt.matrix, expected.per_prompt.matrix)
    assert evaluator.gold.digest() == loop.gold.digest()
    assert Path(found.nbest).name == "nbest-step7.tsv" and (tmp_path / "lists" / "gold.txt").is_file()  # a subset
    again = save_nbest(expected.nbest, tmp_path / "loop-lists", "nbest-step7", "tsv", loop.gold)
    assert Path(found.nbest).read_bytes() == Path(again).read_bytes()


# -- a tiny run, loop and async -------------------------------------------------------------------------------------


def tiny_trainer(out: Path, data: Path, mode: str, device: str = "cpu"):
    """A tiny T5 learning the synthetic corpus, stopped by the strict rule on 1-best BLEU (which moves
    from the first evaluations, where MAP is still 0)."""
    config = hf_demo.DemoConfig(output_dir=str(out), data=str(data), max_steps=MAX_STEPS, eval_steps=EVAL_STEPS,
                                stopping="strict", learning_rate=1e-2, warmup_steps=0, num_beams=4,
                                eval_batch_size=8, batch_size=16, max_new_tokens=12, metrics=("map", "bleu_1x1"),
                                save_nbest=True, eval_prompts=24, nbest_mode=mode, async_device=device)
    trainer = hf_demo.make_trainer(config)
    stopping = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, hf.NBestEarlyStoppingCallback))
    stopping.stopping = EarlyStopping("bleu_1x1", "strict", PATIENCE, warmup=2)
    return trainer


def eval_entries(trainer):
    return {e["step"]: {k: v for k, v in e.items() if k in ("eval_map", "eval_bleu_1x1", "eval_nbest_kept_step")}
            for e in trainer.state.log_history if "eval_map" in e}


@pytest.fixture(scope="module")
def hf_loop_run(synth_dir, tmp_path_factory):
    trainer = tiny_trainer(tmp_path_factory.mktemp("loop"), synth_dir, "loop")
    trainer.train()
    return trainer


def kept_step(trainer) -> int:
    return int(Path(trainer.state.best_model_checkpoint).name.rsplit("-", 1)[1])


@pytest.mark.training
def test_async_mode_makes_the_loops_measures_verdict_and_kept_weights(synth_dir, tmp_path, hf_loop_run):
    loop = hf_loop_run
    run = tiny_trainer(tmp_path / "async", synth_dir, "async")
    run.train()
    expected, found = eval_entries(loop), eval_entries(run)
    assert expected and loop.state.global_step < MAX_STEPS  # the loop stopped early
    assert {step: found[step] for step in expected} == expected  # every loop evaluation, equal values
    queue = Queue(tmp_path / "async")
    verdict = queue.read_verdict()
    assert verdict["stop"] and max(expected) == queue.result(verdict["stop_seq"])["tags"]["step"]
    assert all(step <= max(expected) for step in found)  # nothing after the stop was evaluated
    loop_kept = kept_step(loop)
    assert verdict["kept"]["step"] == loop_kept == run.state.best_global_step
    assert loop_kept < max(expected) < run.state.global_step  # so the kept weights are not the last ones
    assert run.state.global_step <= loop.state.global_step + 4 * EVAL_STEPS  # within the lag (2 waiting + 2)
    for name, tensor in loop.model.state_dict().items():  # both loaded their kept model at the end
        assert torch.equal(tensor, run.model.state_dict()[name]), name
    entry = next(e for e in run.state.log_history if e.get("step") == loop_kept and "eval_map" in e)
    assert entry["nbest_lag_s"] >= 0 and entry["nbest_arrived_step"] >= loop_kept
    assert json.loads(Path(queue.path("manifest.json")).read_text())["framework"] == "hf"
    loop_lists, async_lists = Path(loop.args.output_dir) / "nbest", Path(run.args.output_dir) / "nbest"
    names = sorted(os.listdir(loop_lists))
    assert len(names) == len(expected) + 1 and "gold.txt" in names  # a list per evaluation, their prompts' gold
    for name in names:  # the sidecar saved the loop's lists, byte for byte
        assert (async_lists / name).read_bytes() == (loop_lists / name).read_bytes(), name
    assert run.evaluate()["eval_map"] == expected[loop_kept]["eval_map"]  # after training: generated in-process


def _args(**fields):
    from types import SimpleNamespace

    return SimpleNamespace(**{"save_strategy": "steps", "metric_for_best_model": None, **fields})


@pytest.mark.parametrize("options, args, message", [
    ({"preprocess": str.upper}, {}, "preprocess cannot be recorded"),
    ({}, {"save_strategy": "best"}, "save_strategy='best'"),
    ({}, {"metric_for_best_model": "eval_map"}, "arrives after its evaluation"),
])
def test_async_refuses_what_it_cannot_do_before_training(synth_dir, options, args, message):
    callback = hf.NBestEvalCallback(synth_dir / GOLD_FILE, mode="async", **options)
    with pytest.raises(ValueError, match=message):
        callback.handoff.check(_args(**args))


def test_an_unknown_mode_or_queue_is_refused(synth_dir):
    with pytest.raises(ValueError, match="mode must be one of loop, async"):
        hf.NBestEvalCallback(synth_dir / GOLD_FILE, mode="sidecar")
    with pytest.raises(ValueError, match="async_queue must be"):
        hf.NBestEvalCallback(synth_dir / GOLD_FILE, mode="async", async_queue=0)


@pytest.mark.training
def test_an_external_sidecar_started_first_decides_as_the_loop(synth_dir, tmp_path, hf_loop_run):
    """async_device="external": `nbest-eval watch OUTPUT_DIR` started by hand, before the trainer; no child."""
    out = tmp_path / "external"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    watcher = subprocess.Popen([sys.executable, "-m", "nbest_eval", "watch", str(out), "--poll", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        run = tiny_trainer(out, synth_dir, "async", device="external")
        run.train()
        text, _ = watcher.communicate(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0 and text.startswith("watch: waiting for a run to hand off to"), text
    assert Queue(out).read_verdict()["kept"]["step"] == kept_step(hf_loop_run) == run.state.best_global_step
    assert not (out / "nbest-async" / "sidecar.log").exists()
    assert eval_entries(run) == {s: e for s, e in eval_entries(hf_loop_run).items() if s in eval_entries(run)}
