"""The generation settings are declared once (nbest_eval.training.generation): every place that sets,
records or passes them on names each one, with the declared default where it has one. A seventh
declaration (a setting added in one place only, or a default changed in one) fails here."""

import inspect
from dataclasses import fields

import pytest

from nbest_eval.cli import build_parser
from nbest_eval.data import InputError
from nbest_eval.selection.run_settings import FAIRSEQ, GENERATION
from nbest_eval.training.generation import DECLARED, GenerationSettings

NAMES = ["beam", "nbest_size", "max_len_a", "max_len_b", "lenpen"]


def test_the_declaration_names_each_setting_once_as_each_reader_spells_it():
    assert list(DECLARED) == NAMES == [f.name for f in fields(GenerationSettings)]
    assert [s.fairseq_name for s in DECLARED.values()] == ["nbest_beam", "nbest_size", "nbest_max_len_a",
                                                           "nbest_max_len_b", "nbest_lenpen"]
    assert [s.hf_name for s in DECLARED.values()] == ["num_beams", "num_return_sequences", "max_len_a", "max_len_b",
                                                      "length_penalty"]
    assert [s.option for s in DECLARED.values()] == ["--beam", "--nbest-size", "--max-len-a", "--max-len-b",
                                                     "--lenpen"]
    assert GenerationSettings() == GenerationSettings(beam=10, nbest_size=None, max_len_a=0.0, max_len_b=200,
                                                      lenpen=1.0)


@pytest.mark.parametrize("settings, message", [
    (GenerationSettings(beam=0), "beam must be >= 1, got 0"),
    (GenerationSettings(beam=4, nbest_size=5), r"nbest_size must be between 1 and beam \(4\), got 5"),
    (GenerationSettings(beam=4, nbest_size=0), r"nbest_size must be between 1 and beam \(4\), got 0"),
])
def test_a_beam_below_1_or_an_nbest_size_beyond_it_is_refused(settings, message):
    with pytest.raises(InputError, match=message):
        settings.check()


def test_the_size_is_the_beam_unless_given():
    assert GenerationSettings(beam=4).size == 4 and GenerationSettings(beam=4, nbest_size=2).size == 2


def test_selects_options_records_and_cache_key_name_every_setting():
    group = next(g for g in build_parser()._subparsers._group_actions[0].choices["select"]._action_groups
                 if g.title.startswith("generation"))
    options = {a.option_strings[0]: a for a in group._group_actions}
    for setting in DECLARED.values():
        action = options[setting.option]
        assert action.default is None and action.type is setting.type and action.help == setting.help  # None: the run's
    assert [s.name for s in GENERATION] == NAMES and all(s in FAIRSEQ for s in GENERATION)
    assert [s.name for s in GENERATION if not s.required] == ["nbest_size"]  # the beam's, never a guess


def test_the_fairseq_task_options_are_the_declared_ones():
    pytest.importorskip("fairseq")
    from nbest_eval.fairseq import checkpoints
    from nbest_eval.fairseq.generation import NBestOptions
    from nbest_eval.fairseq.task import TranslationNBestConfig

    config = {f.name: f for f in fields(TranslationNBestConfig)}
    for setting in DECLARED.values():
        assert config[setting.fairseq_name].default == setting.default
        assert config[setting.fairseq_name].metadata["help"] == setting.help
        assert checkpoints.FIELDS[setting.name] == setting.fairseq_name
    assert NBestOptions() == NBestOptions(**{f.name: f.default for f in fields(GenerationSettings)})
    assert _keywords(checkpoints.checkpoint_nbest)[:len(NAMES)] == NAMES
    with pytest.raises(InputError, match=r"--nbest-size must be between 1 and --nbest-beam \(3\), got 4"):
        NBestOptions(beam=3, nbest_size=4)


def test_nbest_options_take_the_0_5_spellings_for_one_release():
    pytest.importorskip("fairseq")
    from nbest_eval.fairseq.generation import NBestOptions

    with pytest.warns(DeprecationWarning, match="nbest_size"):
        old = NBestOptions(beam=4, size=2, lenpen=0.5)
    assert old == NBestOptions(beam=4, nbest_size=2, lenpen=0.5) == NBestOptions(4, 2, 0.0, 200, 0.5)
    assert old.size == 2


def test_the_hf_evaluator_takes_them_in_transformers_names_with_the_declared_defaults():
    pytest.importorskip("transformers")
    hf = pytest.importorskip("nbest_eval.hf")

    declared = inspect.signature(hf.NBestEvaluator).parameters
    for setting in DECLARED.values():
        default = None if setting.hf_unset else setting.default  # max_new_tokens bounds the length
        assert declared[setting.hf_name].default == default, setting.name
        assert hf.checkpoints.EVALUATOR[setting.name] == setting.hf_name
    assert _keywords(hf.checkpoint_nbest)[:len(NAMES)] == NAMES
    assert [s.name for s in hf.checkpoints.SETTINGS][:len(NAMES)] == NAMES


def _keywords(function):
    return [name for name, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY]
