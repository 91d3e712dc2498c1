"""--known-top and --known-threshold exclude each other whatever the values (issue 31 trial): a
value equal to a declared default read as "not given" to argparse's exclusive group and the
Scorer's check, so `--known-top 3 --known-threshold 0.4` let the threshold win silently. Every
option of an exclusive group now defaults to None, and the top 3 is what neither given means."""

import argparse

import pytest

from nbest_eval import GoldPrompt, Hyp, InputError, Scorer
from nbest_eval.cli import main
from nbest_eval.cli.common import add_scorer_arguments
from nbest_eval.metrics import PARAMS, Param

#: weights 5, 3, 1, 1: the top 3 is {a, b, c}, at 40% and more only {a}; the list finds a and c
PROMPT = GoldPrompt("p", "x", (("a", 5.0), ("b", 3.0), ("c", 1.0), ("d", 1.0)))
HYPS = [Hyp("a"), Hyp("c")]

BOTH = [(3, 0.4), (3, 0.1), (1, 0.1), (2, 1.0)]


def coverage(**options):
    scorer = Scorer(["coverage"], **options)
    return scorer.values(scorer.prompt_stats(PROMPT, HYPS))["coverage"]


@pytest.mark.parametrize("top, threshold", BOTH)
def test_the_scorer_refuses_both_whatever_their_values(top, threshold):
    with pytest.raises(InputError, match="at most one of known_top and known_threshold"):
        Scorer(["coverage"], known_top=top, known_threshold=threshold)


@pytest.mark.parametrize("recorded", [False, True])  # score's options, and select's (default: the run's)
@pytest.mark.parametrize("top, threshold", BOTH)
def test_the_command_line_refuses_both_whatever_their_values(capsys, recorded, top, threshold):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser, recorded=recorded)
    with pytest.raises(SystemExit):
        parser.parse_args(["--known-top", str(top), "--known-threshold", str(threshold)])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_fairseq_task_refuses_both():
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    from nbest_eval.fairseq.scorer_options import scorer_options
    from nbest_eval.fairseq.task import TranslationNBestConfig

    parser = argparse.ArgumentParser()
    gen_parser_from_dataclass(parser, TranslationNBestConfig())
    args = parser.parse_args(["DATA", "--nbest-known-top", "3", "--nbest-known-threshold", "0.4"])
    with pytest.raises(InputError, match="at most one of known_top and known_threshold"):
        Scorer(["map"], **scorer_options(args))


def test_neither_given_is_the_top_3():
    """By hand: the top 3 {a, b, c}, of which the list has a and c; at 40% of the weight {a}, found."""
    assert coverage() == coverage(known_top=3) == pytest.approx(2 / 3)
    assert coverage(known_threshold=0.4) == 1.0
    assert Scorer(["coverage"]).metrics[0].options["known"] == "top3"


def test_score_on_the_command_line_says_top_3_by_default(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p|x\na|0.5\nb|0.3\nc|0.1\nd|0.1\n\n", encoding="utf-8")
    nbest = tmp_path / "nbest.tsv"
    nbest.write_text("p\t1\t-1\ta\np\t2\t-2\tc\n", encoding="utf-8")
    assert main(["score", "--gold", str(gold), "--nbest", str(nbest), "--metrics", "coverage"]) == 0
    out = capsys.readouterr().out
    assert "coverage|known:top3|" in out and "0.6667" in out


def test_every_option_of_an_exclusive_group_defaults_to_none():
    """A declared default would read as "not given", and let a second option of the group in."""
    assert all(param.default is None for param in PARAMS.values() if param.exclusive)
    with pytest.raises(ValueError, match="must default to None"):
        Param("x_top", int, 3, "help", exclusive="x")
