"""Real reporters: TensorBoard event files written by fairseq (--tensorboard-logdir) and by the
Hugging Face Trainer (report_to=["tensorboard"]) hold every n-best metric at every validation."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorboard", reason="tensorboard is not installed (the test extra installs it)")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
METRICS = ["map", "bleu_1x1", "bleu_100x100", "wf1"]


def scalars(logdir: Path):
    """{"split/tag": [step, ...]} of every scalar in the event files under ``logdir``: fairseq writes
    tag ``map`` into a ``valid`` folder, the Trainer tag ``eval/map``."""
    found = {}
    for events in logdir.rglob("events.out.tfevents.*"):
        accumulator = event_accumulator.EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            name = tag if "/" in tag else f"{events.parent.name}/{tag}"
            found.setdefault(name, []).extend(event.step for event in accumulator.Scalars(tag))
    return found


def test_fairseq_tensorboard_has_every_metric_at_every_validation(tmp_path):
    pytest.importorskip("fairseq")
    python = [sys.executable, "-m", "nbest_eval"]
    subprocess.run(python + ["synth", "data", "--train-pairs", "400", "--valid-prompts", "12"], cwd=tmp_path,
                   env=ENV, check=True, capture_output=True)
    tools = Path(sys.executable).parent
    subprocess.run([str(tools / "fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
                    "--trainpref", "data/train", "--validpref", "data/valid", "--destdir", "bin", "--workers", "1",
                    "--joined-dictionary"], cwd=tmp_path, env=ENV, check=True, capture_output=True)
    args = shlex.split((REPO / "configs" / "tiny_transformer.args").read_text(), comments=True)
    result = subprocess.run([str(tools / "fairseq-train"), "bin", "--user-dir", str(REPO / "plugin"), *args,
                             "--nbest-gold", "data/valid.gold.txt", "--nbest-metrics", ",".join(METRICS),
                             "--max-epoch", "3", "--save-dir", "ckpt", "--tensorboard-logdir", "tb"],
                            cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = scalars(tmp_path / "tb")
    for key in METRICS + ["nbest_gen_s", "nbest_score_s", "nbest_prompts"]:
        assert len(found.get(f"valid/{key}", [])) == 3, (key, sorted(found))


def test_hf_tensorboard_has_every_metric_at_every_evaluation(tmp_path):
    pytest.importorskip("transformers")
    from experiments import hf_toy

    data = hf_toy.ensure_synth(tmp_path / "synth", seed=1, train_pairs=2000, valid_prompts=16)
    config = hf_toy.DemoConfig(output_dir=str(tmp_path / "run"), data=str(data), max_steps=40, eval_steps=20,
                               num_beams=4, eval_batch_size=8, batch_size=32, max_new_tokens=16, metrics=METRICS,
                               report_to=("tensorboard",), save_nbest=False)
    trainer = hf_toy.make_trainer(config)
    trainer.train()
    found = scalars(tmp_path / "run")  # the TensorBoard callback writes under the output folder
    for key in METRICS + ["nbest_gen_s", "nbest_score_s", "nbest_prompts"]:
        assert found.get(f"eval/{key}") == [20, 40], (key, sorted(found))
