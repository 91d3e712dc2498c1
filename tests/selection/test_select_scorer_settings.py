"""select's scorer settings: an option's value "none" is sacrebleu's tokenizer or smoothing "none"
where that is one of the setting's values (not "no value", as for --remove-bpe none); and the cache
key holds every setting scored with, as resolved (the run's record or an option given), so a changed
setting scores again rather than reuse entries of other numbers, and entries keyed as nbest-eval 0.4
keyed them (without the scorer's options) are scored again, never reused."""

import json
import os

import pytest
from cases import random_case

from nbest_eval import __version__
from nbest_eval.cli import build_parser, main, select_source
from nbest_eval.cli import select as select_cli
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.metrics import PARAMS, Param
from nbest_eval.selection.run_settings import FAIRSEQ, SCORER, resolve


def changed(param: Param) -> str:
    """A value of ``param`` other than its default, as given on the command line."""
    if param.choices:
        return next(choice for choice in param.choices if choice != param.default)
    return {int: "2", float: "0.3"}[param.type]


def given(param: Param):
    """The option that sets ``param`` to :func:`changed` (a flag: the flag)."""
    option = "--" + param.name.replace("_", "-")
    return [option] if param.type is bool else [option, changed(param)]


@pytest.fixture(scope="module")
def case():
    return random_case(5, n_prompts=30)


def cache_key(gold, *argv):
    """select's cache key for an n-best file scored with ``argv``, by select's own path (no file is read)."""
    args = build_parser().parse_args(["select", "run.tsv", "--from-nbest", "--gold", "g", *argv])
    source = select_source.nbest_source(args, gold, ["run.tsv"])
    return select_cli.cache_options(args, gold, select_cli.source_scorer(args, source), source)


@pytest.mark.parametrize("name", PARAMS)
def test_every_scorer_option_changes_the_cache_key(case, name):
    gold, _ = case
    default = cache_key(gold)
    assert cache_key(gold, *given(PARAMS[name])) != default
    assert cache_key(gold) == default  # the key is a function of the settings


def test_entries_keyed_before_the_scorer_carried_its_options_are_scored_again(case, tmp_path, monkeypatch, capsys):
    gold, nbest = case
    write_gold(gold, tmp_path / "gold.txt")
    for run in ("run1", "run2"):
        write_nbest(nbest, tmp_path / f"{run}.tsv", "tsv")
    args = ["select", "--from-nbest", str(tmp_path / "run1.tsv"), str(tmp_path / "run2.tsv"),
            "--gold", str(tmp_path / "gold.txt"), "--metrics", "map", "--cache", str(tmp_path / "cache.json")]

    def earlier_key(args, gold, scorer, source):  # the key of nbest-eval 0.4 and before
        settings = ("wf1_top", "wf1_threshold", "bleu_tokenize", "bleu_lowercase", "rbp_p")
        return {"metrics": args.metrics, "scorer": {name: getattr(args, name) for name in settings},
                "source": {"format": args.format}, "version": __version__, "gold": gold.digest()}

    with monkeypatch.context() as patched:
        patched.setattr(select_cli, "cache_options", earlier_key)
        assert main(args) == 0
    read = []
    real = select_source.read_nbest
    monkeypatch.setattr(select_source, "read_nbest", lambda path, *rest: read.append(path) or real(path, *rest))
    assert main(args) == 0
    assert sorted(map(os.path.basename, read)) == ["run1.tsv", "run2.tsv"]
    assert len(json.loads((tmp_path / "cache.json").read_text())) == 4
    capsys.readouterr()


def test_none_is_a_value_where_the_setting_has_it():
    given = {"bleu_tokenize": "none", "bleu_smooth_method": "none", "remove_bpe": "none", "max_prompts": "none"}
    values = resolve(FAIRSEQ + SCORER, [("ckpt", {"beam": 4, "max_len_a": 0, "max_len_b": 5, "lenpen": 1.0,
                                                   "detok": "space", "prompt_map": "id"})], given).values
    assert values["bleu_tokenize"] == "none" and values["bleu_smooth_method"] == "none"
    assert values["remove_bpe"] is None and values["max_prompts"] is None


@pytest.mark.parametrize("option", ["--bleu-tokenize", "--bleu-smooth-method"])
def test_select_scores_bleu_with_none_as_score_does(case, tmp_path, capsys, option):
    """``none`` reaches sacrebleu as its tokenizer or smoothing "none": select's value and signature
    are score's (whose BLEU is sacrebleu's, tests/metrics)."""
    gold, nbest = case
    write_gold(gold, tmp_path / "gold.txt")
    write_nbest(nbest, tmp_path / "run.tsv", "tsv")
    common = ["--gold", str(tmp_path / "gold.txt"), "--metrics", "bleu_1x1", option, "none", "--json"]
    assert main(["score", "--nbest", str(tmp_path / "run.tsv"), *common]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert main(["select", "--from-nbest", str(tmp_path / "run.tsv"), "--metric", "bleu_1x1", "--no-cache",
                 *common]) == 0
    selected = json.loads(capsys.readouterr().out)
    assert selected["systems"][0]["values"]["bleu_1x1"] == scored["bleu_1x1"]
    assert ("|tok:none|" if option == "--bleu-tokenize" else "|smooth:none|") in selected["signatures"]["bleu_1x1"]


def test_a_long_recorded_list_is_shown_by_its_size():
    """A run's 500 prompt ids are not printed on one line: the first two and the count."""
    from nbest_eval.selection.run_settings import Setting, describe

    prompts = [f"prompt_{i}" for i in range(500)]
    settings = (Setting("beam"), Setting("prompts"), Setting("metrics"))
    assert describe({"beam": 8, "prompts": prompts, "metrics": ["map", "wf1"]}, settings) == \
        "beam 8, prompts prompt_0,prompt_1,... (500 in all), metrics map,wf1"
