"""The scorer's settings, declared once by the metrics (nbest_eval.metrics.PARAMS): a scorer rebuilt
from its ``options`` scores as it does, and every declared parameter changes a number, reaches the
signatures of the metrics that declare it, the command line and the fairseq task's options (the
select cache key: tests/selection/test_select_scorer_settings.py)."""

import argparse
import json

import pytest
from cases import pattern_keys, random_case

from nbest_eval import Gold, GoldPrompt, Hyp, Scorer
from nbest_eval.cli import build_parser
from nbest_eval.cli.common import add_scorer_arguments, scorer_from_args
from nbest_eval.metrics import PARAMS, REGISTRY, Param
from nbest_eval.processes import pipeline
from nbest_eval.signature import signatures

#: a change of each declared parameter, with what it needs to change a number (a smoothing value
#: counts for floor and add-k smoothing only)
CHANGES = {
    "rbp_p": {"rbp_p": 0.8},
    "wf1_top": {"wf1_top": 2},
    "wf1_threshold": {"wf1_threshold": 0.3},
    "wf1_nil": {"wf1_nil": "skip"},
    "bleu_tokenize": {"bleu_tokenize": "char"},
    "bleu_lowercase": {"bleu_lowercase": True},
    "bleu_smooth_method": {"bleu_smooth_method": "floor"},
    "bleu_smooth_value": {"bleu_smooth_method": "floor", "bleu_smooth_value": 0.5},
    "iprec_rule": {"iprec_rule": "exact"},
    "known_top": {"known_top": 2},
    "known_threshold": {"known_threshold": 0.3},
}
DEFAULTS = {name: param.default for name, param in PARAMS.items()}
#: a key of each registered pattern (p{k}: p2, bleu_{x}x{y}: bleu_2x2, iprec{r}: iprec0.2)
KEYS = [pattern_keys(spec)[0] for spec in REGISTRY]


def unchanged(name):
    """The settings of ``CHANGES[name]`` but the parameter itself."""
    return {other: value for other, value in CHANGES[name].items() if other != name}


def options(settings, prefix="--"):
    """The command-line options that give ``settings``."""
    given = [(prefix + name.replace("_", "-"), value) for name, value in settings.items()]
    return [part for option, value in given for part in ([option] if value is True else [option, str(value)])]


@pytest.fixture(scope="module")
def random_30():
    """A random 30-prompt gold and its n-best lists (cases.random_case, seed 5)."""
    return random_case(5, n_prompts=30)


def test_every_declared_parameter_has_a_change_here():
    assert sorted(CHANGES) == sorted(PARAMS)


@pytest.mark.parametrize("name", PARAMS)
def test_a_scorer_rebuilt_from_its_options_scores_identically(random_30, name):
    gold, nbest = random_30
    scorer = Scorer(KEYS, **CHANGES[name])
    settings = json.loads(json.dumps(scorer.options))  # plain JSON values
    assert settings == {**DEFAULTS, **CHANGES[name]}
    rebuilt = Scorer(scorer.keys, **settings)
    assert (rebuilt.keys, rebuilt.options) == (scorer.keys, scorer.options)
    first, again = (s.score(gold, nbest, keep_per_prompt=True) for s in (scorer, rebuilt))
    assert again.values == first.values and again.per_prompt == first.per_prompt
    assert signatures(rebuilt, gold, 15) == signatures(scorer, gold, 15)


@pytest.mark.parametrize("name", PARAMS)
def test_every_parameter_changes_a_value_and_the_signature_of_the_metrics_that_declare_it(random_30, name):
    gold, nbest = random_30
    before, after = Scorer(KEYS, **unchanged(name)), Scorer(KEYS, **CHANGES[name])
    declaring = {key for key, spec in zip(KEYS, REGISTRY) if PARAMS[name] in spec.params}
    old, new = signatures(before, gold, 15), signatures(after, gold, 15)
    assert {key for key in KEYS if old[key] != new[key]} == declaring
    short = Gold([GoldPrompt("p", "the cat drinks well", (("o gato bebe muito bem", 1.0),))])
    cases = [(gold, nbest), (short, {"p": [Hyp("o gato come muito bem", -1.0)]})]  # no 3-gram matches: smoothing
    old, new = ([scorer.score(*case).values for case in cases] for scorer in (before, after))
    changed = {key for key in KEYS for values, others in zip(old, new) if values[key] != others[key]}
    assert changed and changed <= declaring


def test_default_settings_sign_as_documented(random_30):
    gold, _ = random_30
    signed = signatures(Scorer(["bleu_2x2", "wf1", "rbp_t", "map"]), gold, 15)
    assert {key: text.split("|nbest:")[0] for key, text in signed.items()} == {
        "bleu_2x2": "bleu_2x2|tok:13a|case:mixed|smooth:exp", "wf1": "wf1|trunc:none", "rbp_t": "rbp_t|p:0.5",
        "map": "map"}


def test_options_are_checked():
    with pytest.raises(TypeError, match="unknown scorer option 'rbp'"):
        Scorer(["map"], rbp=0.5)
    for bad, message in [({"rbp_p": 1}, "rbp_p must be in"), ({"wf1_top": 1.5}, "wf1_top must be a int"),
                         ({"bleu_tokenize": "x"}, "bleu_tokenize must be one of"),
                         ({"wf1_top": 2, "wf1_threshold": 0.5}, "at most one of wf1_top and wf1_threshold")]:
        with pytest.raises(ValueError, match=message):
            Scorer(["map"], **bad)


def test_every_option_of_an_exclusive_group_defaults_to_none():
    """A declared default would read as "not given", and let a second option of the group in."""
    assert all(param.default is None for param in PARAMS.values() if param.exclusive)
    with pytest.raises(ValueError, match="must default to None"):
        Param("x_top", int, 3, "help", exclusive="x")


# -- the command line ---------------------------------------------------------------------------------------

def test_every_scoring_command_has_every_parameter():
    commands = build_parser()._subparsers._group_actions[0].choices
    scoring = [name for name, parser in commands.items() if "--metrics" in parser._option_string_actions]
    assert sorted(scoring) == ["ablate", "compare", "score", "select"]
    for name in scoring:
        assert set(options(dict.fromkeys(PARAMS, True))) <= set(commands[name]._option_string_actions), name


@pytest.mark.parametrize("name", PARAMS)
def test_every_parameter_is_a_command_line_option(name):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser)
    assert scorer_from_args(parser.parse_args([])).options == DEFAULTS
    assert scorer_from_args(parser.parse_args(options(CHANGES[name]))).options == {**DEFAULTS, **CHANGES[name]}


def test_the_f1_truncations_exclude_each_other(capsys):
    parser = argparse.ArgumentParser()
    add_scorer_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--wf1-top", "2", "--wf1-threshold", "0.5"])
    assert "not allowed with argument" in capsys.readouterr().err


# -- the training adapters ----------------------------------------------------------------------------------

def test_every_parameter_is_a_fairseq_task_option():
    pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
    from fairseq.dataclass.utils import gen_parser_from_dataclass
    from omegaconf import OmegaConf

    from nbest_eval.fairseq.scorer_options import scorer_options
    from nbest_eval.fairseq.task import TranslationNBestConfig

    parser = argparse.ArgumentParser()
    gen_parser_from_dataclass(parser, TranslationNBestConfig())
    assert scorer_options(parser.parse_args(["DATA"])) == DEFAULTS
    for name, settings in CHANGES.items():
        expected = {**DEFAULTS, **settings}
        args = parser.parse_args(["DATA", *options(settings, prefix="--nbest-")])
        assert Scorer(["map"], **scorer_options(args)).options == expected, name
        cfg = OmegaConf.structured(TranslationNBestConfig(**{f"nbest_{k}": v for k, v in settings.items()}))
        assert Scorer(["map"], **scorer_options(cfg)).options == expected, name  # hydra configs


def test_the_hugging_face_evaluator_scores_with_its_options_beside_generation(random_30):
    pytest.importorskip("transformers", reason="transformers is not installed (make venv installs it)")
    from nbest_eval.hf import NBestEvaluator

    gold, _ = random_30
    evaluator = NBestEvaluator(gold, metrics=["rbp_t"], scorer_options={"rbp_p": 0.8})
    assert evaluator.scorer.options == {**DEFAULTS, "rbp_p": 0.8}
    ready = NBestEvaluator(gold, metrics=Scorer(["wf1"], wf1_top=2))  # F1 metrics do not pickle
    try:
        assert isinstance(ready.start_scoring(), pipeline.ScoringProcess)
    finally:
        ready.close()
