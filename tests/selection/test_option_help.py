"""Each scoring setting's help is declared once, in cli/common.py, with parameters for what differs
between commands (select's scorer options default to the run's record; its --n-samples default
depends on the checkpoints), not rewritten afterwards through argparse's private attributes."""

import argparse
import ast
from pathlib import Path

import pytest

import nbest_eval.cli
from nbest_eval.cli import build_parser, main
from nbest_eval.cli.common import add_resampling_arguments, add_scorer_arguments
from nbest_eval.metrics import PARAMS
from nbest_eval.scorer import DEFAULT_METRICS
from nbest_eval.significance import DEFAULT_SAMPLES
from nbest_eval.training.early_stopping import DEFAULT_RULE, RULES

CLI = Path(nbest_eval.cli.__file__).parent


def help_text(parser: argparse.ArgumentParser, monkeypatch) -> str:
    """The help on one line per option (wide, so that argparse breaks no word), whitespace collapsed."""
    monkeypatch.setenv("COLUMNS", "10000")
    return " ".join(parser.format_help().split())


def command_help(name: str, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "10000")
    with pytest.raises(SystemExit):
        main([name, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_no_cli_module_touches_argparse_private_attributes():
    """``parser._actions``, ``_option_string_actions``... are argparse's internals: an option's help
    is passed to add_argument, once."""
    for path in sorted(CLI.glob("*.py")):
        private = [node.attr for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Attribute) and node.attr.startswith("_") and "action" in node.attr]
        assert not private, f"{path.name}: {private}"


def test_recorded_scorer_options_default_to_none_and_say_the_declared_default(monkeypatch):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser, recorded=True)
    assert vars(parser.parse_args([])) == dict.fromkeys(["metrics", *PARAMS])  # None: not given
    text = help_text(parser, monkeypatch)
    assert f"comma-separated metric keys (default: the run's; n-best files: {','.join(DEFAULT_METRICS)}). Keys:" \
        in text
    for param in PARAMS.values():  # a setting with no declared default (its help says what then) says none
        declared = "" if param.default is None else f"; n-best files: {param.default}"
        assert f"{' '.join(param.help.split())} (default: the run's{declared})" in text, param.name
    assert "%(default)" not in text and text.count("(default: the run's") == len(PARAMS) + 1


def test_declared_scorer_options_keep_their_defaults(monkeypatch):
    """score, compare, ablate: the declared defaults, said where there is one (a flag's goes unsaid)."""
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser, default_metrics=("map",))
    assert vars(parser.parse_args([])) == {"metrics": "map", **{p.name: p.default for p in PARAMS.values()}}
    text = help_text(parser, monkeypatch)
    assert "comma-separated metric keys (default: map). Keys:" in text and "the run's" not in text
    for param in PARAMS.values():
        said = param.default is not None and param.type is not bool
        assert (f"{' '.join(param.help.split())} (default: {param.default})" in text) == said, param.name


def test_select_scorer_options_are_the_runs(monkeypatch, capsys):
    args = build_parser().parse_args(["select", "run.tsv", "--from-nbest", "--gold", "g"])
    assert {name: getattr(args, name) for name in ["metrics", *PARAMS]} == dict.fromkeys(["metrics", *PARAMS])
    assert "(default: the run's; n-best files: map," in command_help("select", monkeypatch, capsys)
    for name in ("score", "compare", "ablate"):
        assert "the run's" not in command_help(name, monkeypatch, capsys), name


def test_resampling_default_is_a_parameter(monkeypatch):
    parser = argparse.ArgumentParser()
    add_resampling_arguments(parser, "resamples of X", default="enough for Y")
    assert "--n-samples N resamples of X (default: enough for Y)" in help_text(parser, monkeypatch)


@pytest.mark.parametrize("name", ["score", "compare"])
def test_n_samples_default_is_significance_default(name, monkeypatch, capsys):
    text = command_help(name, monkeypatch, capsys)
    assert (f"(default: {DEFAULT_SAMPLES['bs']} bootstrap resamples, {DEFAULT_SAMPLES['ar']} "
            f"approximate-randomization trials)") in text



def test_select_stopping_help_names_every_rule_and_the_default(monkeypatch, capsys):
    """--stopping's help is the rules table's, so it names every rule, the default (proportional) too."""
    text = command_help("select", monkeypatch, capsys)
    said = text[text.index("--stopping {"):]
    said = said[said.index("the early-stopping rule replayed"):]
    for rule in RULES:
        assert f"{rule}: " in said or f"{rule} (default): " in said, rule
    assert f"{DEFAULT_RULE} (default): " in said and DEFAULT_RULE == "proportional"
