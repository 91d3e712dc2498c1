"""The n-best settings the HF callback records in every checkpoint (nbest_eval.hf.settings): what is
recorded, that they rebuild an evaluator scoring as training did, and that a settings file is input."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from experiments import hf_toy as hf_demo  # noqa: E402
from nbest_eval.data import InputError  # noqa: E402
from nbest_eval.formats import read_gold  # noqa: E402
from nbest_eval.hf import settings as hf_settings  # noqa: E402


def test_the_record_holds_every_setting_as_given(gold_file):
    evaluator = hf.NBestEvaluator(gold_file, num_beams=4, max_len_a=1.5, max_len_b=5, metrics="map,wf1",
                                  scorer_options={"wf1_top": 2}, batch_size=3, max_prompts=2,
                                  generation_kwargs={"early_stopping": True}, decode_kwargs={"x": [1, 2]})
    record = hf_settings.settings_of(evaluator)
    assert record["prompts"] == ["p1", "p2"]
    assert record["gold"] == {"path": str(gold_file), "digest": read_gold(gold_file).digest()}
    recorded = record["evaluator"]
    expected = {"num_beams": 4, "num_return_sequences": 4, "max_new_tokens": 64, "length_penalty": 1.0,
                "generation_kwargs": {"early_stopping": True}, "metrics": ["map", "wf1"], "batch_size": 3,
                "prompt_map": "id", "max_prompts": 2, "subset_size": None, "subset_seed": 0,
                "max_source_length": None, "max_len_a": 1.5, "max_len_b": 5, "preprocess": None,
                "postprocess": None, "decode_kwargs": {"x": [1, 2]}}
    assert {k: recorded[k] for k in expected} == expected
    assert recorded["scorer_options"]["wf1_top"] == 2 and recorded["scorer_options"]["wf1_threshold"] is None
    assert set(recorded) == set(hf.evaluator.SETTINGS) and record["unrecorded"] == []


def test_what_json_cannot_hold_is_named_and_must_be_given_again(gold_file, tmp_path):
    def prefix(text):
        return "translate: " + text

    evaluator = hf.NBestEvaluator(gold_file, preprocess=prefix, generation_kwargs={"stop": object()},
                                  decode_kwargs={"n": float("nan")})
    path = hf_settings.save_settings(tmp_path, evaluator)
    assert path == tmp_path / "nbest_eval.json"
    record = hf_settings.read_settings(tmp_path)
    assert record["unrecorded"] == ["generation_kwargs", "preprocess", "decode_kwargs"]
    assert not set(record["unrecorded"]) & set(record["evaluator"])
    gold = read_gold(gold_file)
    with pytest.raises(InputError, match=r"nbest_eval.json: the run set generation_kwargs, preprocess, "
                                         r"decode_kwargs to something"):
        hf_settings.evaluator_from_settings(record, gold, source=path)
    again = hf_settings.evaluator_from_settings(record, gold, preprocess=prefix, generation_kwargs=None,
                                                decode_kwargs=None)
    assert again.preprocess is prefix and [p.id for p in again.prompts] == ["p1", "p2", "p3"]


def test_rebuilding_keeps_the_recorded_prompts_without_choosing_again(gold_file, tmp_path):
    """A subset of 2 of 3 prompts: the rebuilt evaluator scores those 2, not a subset of them."""
    evaluator = hf.NBestEvaluator(gold_file, subset_size=2, subset_seed=5, num_beams=2)
    hf_settings.save_settings(tmp_path, evaluator, name="sub")
    assert hf_settings.read_settings(tmp_path) is None  # the unnamed callback's file: none
    record = hf_settings.read_settings(tmp_path, name="sub")
    rebuilt = hf_settings.evaluator_from_settings(record, read_gold(gold_file))
    assert [p.id for p in rebuilt.prompts] == [p.id for p in evaluator.prompts] and len(rebuilt.prompts) == 2
    assert rebuilt.generate_kwargs == evaluator.generate_kwargs
    with pytest.raises(InputError, match="validated on prompt 'p1', which the gold"):
        hf_settings.evaluator_from_settings({**record, "prompts": ["p1"]}, read_gold(gold_file).__class__([]))


#: what 0.5.0 wrote for NBestEvaluator(gold) with every default: it records each setting, the default
#: beam of 8 (10 since) among them
RECORD_0_5_0 = {"num_beams": 8, "num_return_sequences": 8, "max_new_tokens": 64, "length_penalty": 1.0,
                "generation_kwargs": None, "metrics": ["map", "bleu_1x1", "bleu_100x100", "wf1"],
                "scorer_options": {}, "batch_size": 32, "prompt_map": "id", "max_prompts": None,
                "subset_size": None, "subset_seed": 0, "max_source_length": None, "max_len_a": None,
                "max_len_b": None, "preprocess": None, "postprocess": None, "decode_kwargs": None}


def test_a_record_of_the_old_default_beam_keeps_its_beam(gold_file, tmp_path):
    gold = read_gold(gold_file)
    record = {"format": 1, "nbest_eval": "0.5.0", "gold": {"path": str(gold_file), "digest": gold.digest()},
              "prompts": ["p1", "p2", "p3"], "evaluator": RECORD_0_5_0, "unrecorded": []}
    (tmp_path / "nbest_eval.json").write_text(json.dumps(record))
    read = hf_settings.read_settings(tmp_path)
    assert hf_settings.evaluator_from_settings(read, gold).generate_kwargs["num_beams"] == 8
    recorded = hf.checkpoints.recorded_settings(tmp_path)  # what select resolves
    assert (recorded["beam"], recorded["nbest_size"], recorded["max_len_a"], recorded["max_len_b"]) == (8, 8, 0.0, 64)


def good_record(gold_file):
    return hf_settings.settings_of(hf.NBestEvaluator(gold_file))


@pytest.mark.parametrize("change, message", [
    (lambda r: "not json {", "not readable n-best settings"),
    (lambda r: json.dumps(r).replace('"length_penalty": 1.0', '"length_penalty": NaN'), "NaN is not a number"),
    (lambda r: "[" * 100000 + "]" * 100000, "nested too deeply"),
    (lambda r: json.dumps([r]), "an object of the keys"),
    (lambda r: json.dumps({**r, "format": 2}), "format 2"),
    (lambda r: json.dumps({**r, "prompts": ["p1", "p1"]}), "distinct prompt ids"),
    (lambda r: json.dumps({**r, "prompts": []}), "distinct prompt ids"),
    (lambda r: json.dumps({**r, "evaluator": {**r["evaluator"], "beams": 3}}), "'beams' is no setting"),
    (lambda r: json.dumps({**r, "unrecorded": ["preprocess"]}), "both recorded and unrecorded"),
    (lambda r: json.dumps({**r, "gold": "x"}), "gold: an object"),
])
def test_a_malformed_file_is_an_error_naming_it(gold_file, tmp_path, change, message):
    path = tmp_path / "nbest_eval.json"
    path.write_text(change(good_record(gold_file)))
    with pytest.raises(InputError, match=f"{path}: .*{message}"):
        hf_settings.read_settings(tmp_path)


def test_a_recorded_value_the_evaluator_refuses_is_an_error_naming_the_file(gold_file, tmp_path):
    record = good_record(gold_file)
    record["evaluator"]["num_beams"] = "8"
    path = tmp_path / "nbest_eval.json"
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match=f"{path}: unusable n-best settings"):
        hf_settings.evaluator_from_settings(hf_settings.read_settings(tmp_path), read_gold(gold_file), source=path)


def test_not_a_file_or_too_large_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "dir" / "nbest_eval.json").mkdir(parents=True)
    with pytest.raises(InputError, match="nbest_eval.json: not a regular file|nbest_eval.json: cannot read"):
        hf_settings.read_settings(tmp_path / "dir")
    os.mkfifo(tmp_path / "nbest_eval.json")
    with pytest.raises(InputError, match="not a regular file"):
        hf_settings.read_settings(tmp_path)
    os.remove(tmp_path / "nbest_eval.json")
    (tmp_path / "nbest_eval.json").write_text(" " * 200)
    monkeypatch.setattr(hf_settings, "MAX_BYTES", 100)
    with pytest.raises(InputError, match="over 100 bytes"):
        hf_settings.read_settings(tmp_path)


def test_only_the_process_that_saves_files_records(gold_file, tmp_path):
    callback = hf.NBestEvalCallback(gold_file)
    (tmp_path / "checkpoint-7").mkdir()
    state = SimpleNamespace(global_step=7)
    callback.on_save(SimpleNamespace(should_save=False, output_dir=str(tmp_path)), state, None)
    assert not (tmp_path / "checkpoint-7" / "nbest_eval.json").exists()
    callback.on_save(SimpleNamespace(should_save=True, output_dir=str(tmp_path)), state, None)
    assert hf_settings.read_settings(tmp_path / "checkpoint-7")["prompts"] == ["p1", "p2", "p3"]


@pytest.mark.training
def test_every_checkpoint_records_settings_that_rescore_to_the_logged_values(tmp_path_factory):
    """A short run: each checkpoint folder the Trainer saved has the settings, and an evaluator rebuilt
    from them (nothing else given) scores that checkpoint to the values logged at its step."""
    data = hf_demo.ensure_synth(tmp_path_factory.mktemp("hf-settings") / "synth", seed=1, train_pairs=400,
                                valid_prompts=24)
    out = tmp_path_factory.mktemp("run")
    config = hf_demo.DemoConfig(output_dir=str(out), data=str(data), max_steps=6, eval_steps=3, warmup_steps=0,
                                num_beams=3, eval_batch_size=5, batch_size=16, max_new_tokens=None, max_len_a=0.5,
                                max_len_b=3, eval_prompts=15, metrics=("map", "bleu_1x1", "pref_spearman"),
                                save_nbest=False)
    trainer = hf_demo.make_trainer(config)
    trainer.train()
    gold = read_gold(data / "valid.gold.txt")
    logged = [e for e in trainer.state.log_history if "eval_map" in e]
    assert [e["step"] for e in logged] == [3, 6]
    for entry in logged:
        folder = out / f"checkpoint-{entry['step']}"
        record = hf_settings.read_settings(folder)
        assert record["unrecorded"] == [] and len(record["prompts"]) == 15
        model, tokenizer = hf.load_model(folder)
        values = hf_settings.evaluator_from_settings(record, gold, tokenizer).evaluate(model).values
        for key in config.metrics:
            assert (values[key] or 0.0) == pytest.approx(entry[f"eval_{key}"], abs=1e-9), (folder, key)
