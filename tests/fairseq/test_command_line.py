"""nbest_eval.fairseq.command_line.plain_translation: the demo's configuration without n-best validation
is a command line that fairseq's own parser takes for plain translation (no user dir loaded)."""

import shlex
from pathlib import Path

import pytest

from nbest_eval.fairseq.command_line import plain_translation

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
