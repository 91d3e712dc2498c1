"""nbest_eval.fairseq.command_line: plain_translation, the demo's configuration without n-best validation,
is a command line that fairseq's own parser takes for plain translation (no user dir loaded); and
fairseq_command runs fairseq's tools where its console scripts are not beside the interpreter."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from nbest_eval.fairseq.command_line import fairseq_command, plain_translation

REPO = Path(__file__).resolve().parents[2]


def test_the_nbest_options_and_the_nbest_best_metric_are_left_out():
    words = ["--task", "translation_nbest", "--nbest-beam", "8", "--nbest-metrics", "map,rr", "--lr", "0.005",
             "--best-checkpoint-metric", "map", "--maximize-best-checkpoint-metric", "--nbest-print-samples", "2",
             "--cpu", "--adam-betas", "(0.9,0.98)"]
    assert plain_translation(words) == ["--task", "translation", "--lr", "0.005", "--cpu",
                                        "--adam-betas", "(0.9,0.98)"]
    assert plain_translation(["--task", "translation_lev"]) == ["--task", "translation_lev"]  # another task stays


@pytest.mark.parametrize("config", ["tiny_transformer.args", "staple_transformer.args"])
def test_fairseqs_parser_takes_the_plain_command_line(config):
    pytest.importorskip("fairseq")
    from fairseq import options

    words = plain_translation(shlex.split((REPO / "configs" / config).read_text(), comments=True))
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["data-bin", *words])
    assert args.task == "translation" and args.best_checkpoint_metric == "loss"
    assert not any(word.startswith("--nbest") for word in words)


@pytest.mark.parametrize("name", ["fairseq-train", "fairseq-preprocess"])
def test_without_console_scripts_beside_the_interpreter_fairseq_runs_as_a_module(tmp_path, monkeypatch, name):
    """As after ``pip install --target DIR``: the scripts are in DIR/bin, not beside ``sys.executable``."""
    pytest.importorskip("fairseq")
    assert fairseq_command(name) == [str(Path(sys.executable).with_name(name))]  # this venv has them
    real = sys.executable
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    command = fairseq_command(name)
    assert command[:2] == [str(tmp_path / "python"), "-m"]
    help_text = subprocess.run([real, *command[1:], "--help"], capture_output=True, text=True, timeout=120).stdout
    assert "usage:" in help_text and "--seed" in help_text  # fairseq's parser answered
