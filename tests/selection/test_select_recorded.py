"""`nbest-eval select --fairseq-data` scores checkpoints as their run validated: with the settings
the checkpoint recorded (a SentencePiece run: beam, length bounds, --nbest-remove-bpe), on the
prompts the run validated on (--nbest-max-prompts of a gold with more), so that its values are the
training log's with no extra option; an option overrides and says so; what cannot be known is refused."""

import io
import json
import logging

import pytest

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")
spm = pytest.importorskip("sentencepiece")

import torch  # noqa: E402
from fairseq_runs import PLUGIN, TINY_ARGS, command, run  # noqa: E402

from nbest_eval import Gold, GoldPrompt  # noqa: E402
from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main  # noqa: E402
from nbest_eval.formats import read_gold, write_gold  # noqa: E402

pytestmark = pytest.mark.training

VALIDATED = 10  # --nbest-max-prompts, of the 16 valid prompts in the gold
SETTINGS = ["--nbest-beam", "4", "--nbest-max-len-a", "1.2", "--nbest-max-len-b", "3",
            "--nbest-remove-bpe", "sentencepiece", "--nbest-max-prompts", str(VALIDATED)]


@pytest.fixture(scope="module")
def spm_run(tmp_path_factory):
    """Two epochs of the tiny transformer on SentencePiece pieces, validated on 10 of the gold's 16 prompts."""
    root = tmp_path_factory.mktemp("select_recorded")
    corpus = generate(seed=1, train_pairs=600, valid_prompts=16)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([t for pair in corpus.train for t in pair]),
                                   model_writer=model, vocab_size=120, model_type="unigram", character_coverage=1.0,
                                   num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    text, data, save = root / "text", root / "bin", root / "ckpt"
    text.mkdir()
    for split, pairs in (("train", corpus.train), ("valid", corpus.valid)):
        for lang, column in (("src", 0), ("tgt", 1)):
            (text / f"{split}.{lang}").write_text("".join(" ".join(sp.encode(p[column], out_type=str)) + "\n"
                                                          for p in pairs))
    gold = root / "gold.txt"
    write_gold(corpus.gold, gold)
    run(command("fairseq-preprocess") + [
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(text / "train"),
        "--validpref", str(text / "valid"), "--destdir", str(data), "--joined-dictionary", "--workers", "1"],
        root / "preprocess.log")
    log = run(command("fairseq-train") + [str(data), "--user-dir", str(PLUGIN), *TINY_ARGS, "--nbest-gold", str(gold),
                                          "--save-dir", str(save), "--max-epoch", "2", "--max-tokens", "250",
                                          "--dropout", "0", "--label-smoothing", "0",
                                          "--required-batch-size-multiple", "1", *SETTINGS], root / "train.log")
    return root, data, save, gold, log.valid


def _select(capsys, *argv):
    cache = [] if "--cache" in argv else ["--no-cache"]
    code = main(["select", *map(str, argv), "--json", *cache])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def _edited(save, tmp_path, edit, name="checkpoint3.pt"):
    """A copy of checkpoint2.pt whose recorded task config ``edit`` changed (a file the test made)."""
    state = torch.load(save / "checkpoint2.pt", weights_only=False)
    edit(state["cfg"]["task"])
    torch.save(state, tmp_path / name)
    return tmp_path / name


def test_select_reproduces_the_training_log_with_no_extra_option(spm_run, capsys):
    root, data, save, gold, valid = spm_run
    code, table, err = _select(capsys, "--fairseq-data", data, save / "checkpoint1.pt", save / "checkpoint2.pt",
                               "--gold", gold, "--metrics", "map,bleu_1x1,bleu_100x100,wf1")
    assert code == 0, err
    assert f"scoring the {VALIDATED} prompts the run validated on, of 16 in the gold" in err
    assert "beam 4" in err and "remove_bpe sentencepiece" in err
    assert [r["valid_nbest_prompts"] for r in valid] == [VALIDATED, VALIDATED]
    assert any(r["valid_bleu_1x1"] > 0 for r in valid)  # something to reproduce
    for system, record in zip(table["systems"], valid):
        for key in ("map", "bleu_1x1", "bleu_100x100", "wf1"):
            logged = record["valid_" + key]
            assert system["values"][key] == pytest.approx(logged, rel=1e-5, abs=1e-5), (system["name"], key)


def test_an_option_overrides_the_record_and_says_so(spm_run, capsys, tmp_path):
    root, data, save, gold, valid = spm_run
    argv = ["--fairseq-data", data, save / "checkpoint2.pt", "--gold", gold, "--metrics", "bleu_1x1",
            "--cache", tmp_path / "cache.json"]
    code, recorded, err = _select(capsys, *argv)
    assert code == 0 and " overrides the run" not in err
    code, overridden, err = _select(capsys, *argv, "--beam", "2", "--lenpen", "3")
    assert code == 0, err
    assert "--beam 2 overrides the run's 4" in err and "--lenpen 3.0 overrides the run's 1.0" in err
    # the cache keys on the settings used: the override is generated, not the recorded run's entry reused
    assert overridden["systems"][0]["values"]["bleu_1x1"] != recorded["systems"][0]["values"]["bleu_1x1"]
    assert len(json.loads((tmp_path / "cache.json").read_text())) == 2
    code, _, err = _select(capsys, *argv, "--remove-bpe", "none")  # the sources are pieces: no prompt matches
    assert code == 2 and "checkpoint2.pt: --nbest-gold does not fit the 'valid' split" in err


def test_checkpoints_that_recorded_different_settings_are_refused_unless_an_option_settles_it(spm_run, capsys,
                                                                                             tmp_path):
    root, data, save, gold, valid = spm_run
    other = _edited(save, tmp_path, lambda task: task.update(nbest_beam=6))
    code, _, err = _select(capsys, "--fairseq-data", data, save / "checkpoint1.pt", other, "--gold", gold)
    assert code == 2
    assert "checkpoint1.pt and" in err and "checkpoint3.pt recorded different beam (4 and 6)" in err
    assert "pass --beam" in err
    code, table, err = _select(capsys, "--fairseq-data", data, save / "checkpoint1.pt", other, "--gold", gold,
                               "--beam", "4", "--metrics", "map")
    assert code == 0 and "--beam 4 overrides the runs' 6 (" in err and "checkpoint3.pt)" in err


@pytest.mark.parametrize("edit, options", [
    (lambda task: task.pop("nbest_lenpen"), "--lenpen"),
    (lambda task: task.update(_name="translation"), "--beam, --max-len-a, --max-len-b, --lenpen, --remove-bpe, "
                                                    "--detok, --prompt-map"),
], ids=["an older plugin without the option", "a plain translation checkpoint"])
def test_a_setting_no_checkpoint_recorded_is_refused_naming_the_option(spm_run, capsys, tmp_path, edit, options):
    root, data, save, gold, valid = spm_run
    old = _edited(save, tmp_path, edit)
    code, _, err = _select(capsys, "--fairseq-data", data, old, "--gold", gold)
    assert code == 2 and f"checkpoint3.pt records no value for {options}" in err
    given = ["--beam", "4", "--max-len-a", "1.2", "--max-len-b", "3", "--lenpen", "1", "--remove-bpe", "sentencepiece",
             "--detok", "space", "--prompt-map", "id", "--max-prompts", str(VALIDATED)]
    code, table, err = _select(capsys, "--fairseq-data", data, old, "--gold", gold, *given, "--metrics", "bleu_1x1")
    assert code == 0, err
    assert table["systems"][0]["values"]["bleu_1x1"] == pytest.approx(valid[1]["valid_bleu_1x1"], rel=1e-5, abs=1e-5)


def test_the_tasks_messages_come_once_in_selects_option_names(spm_run, capsys, caplog, tmp_path):
    """Issue 29 trial: with a gold of more prompts than the split, the task said "not scored" at each
    load (for the prompts, then once a checkpoint), and a length bound beyond the model's positions
    was named in training's --nbest-max-len-a/-b, not in select's options."""
    root, data, save, gold, valid = spm_run
    bigger = tmp_path / "gold.txt"
    extra = [GoldPrompt(f"extra{i}", f"a prompt of no split {i}", (("nada", 1.0),)) for i in range(2)]
    write_gold(Gold(read_gold(gold).prompts + extra), bigger)
    with caplog.at_level(logging.WARNING):
        code, _, err = _select(capsys, "--fairseq-data", data, save / "checkpoint1.pt", save / "checkpoint2.pt",
                               "--gold", bigger, "--max-len-b", "200", "--metrics", "map")
    assert code == 0, err
    logged = [record.getMessage() for record in caplog.records]
    assert sum("2 gold prompt(s) named by no line are not scored" in m for m in logged) == 1, logged
    lengths = [line for line in err.splitlines() if "target positions" in line]
    assert len(lengths) == 1, err
    assert "--max-len-a 1.2 --max-len-b 200 allow " in lengths[0] and "Set --max-len-a/-b so that A * " in lengths[0]
    assert not any("target positions" in m for m in logged)
    assert "--nbest-max-len" not in err + " ".join(logged)
