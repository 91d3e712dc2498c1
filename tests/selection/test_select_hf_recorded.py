"""`nbest-eval select --hf` scores checkpoints as the callback did: with the settings it recorded beside
each checkpoint (nbest_eval.json), on the prompts it validated on; a length beyond a model's positions is
refused before generating, naming the option, not an IndexError deep in generation; a checkpoint
without tokenizer files is refused naming the directory, not scored with a blank tokenizer."""

import json

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from experiments import hf_toy  # noqa: E402
from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main  # noqa: E402
from nbest_eval.data import Gold, GoldPrompt  # noqa: E402
from nbest_eval.formats import write_gold  # noqa: E402
from nbest_eval.hf import settings as hf_settings  # noqa: E402

pytestmark = pytest.mark.training

POSITIONS = 16
VALIDATED = 5  # of the gold's 8 prompts


@pytest.fixture(scope="module")
def hf_checkpoints(tmp_path_factory):
    """Two tiny Marian checkpoints of 16 positions, each with the settings an evaluator recorded, and what
    that evaluator scored (the values training logs)."""
    from transformers import MarianConfig, MarianMTModel

    root = tmp_path_factory.mktemp("select_hf")
    corpus = generate(seed=1, train_pairs=50, valid_prompts=8)
    gold = root / "gold.txt"
    write_gold(corpus.gold, gold)
    tok = hf_toy.build_tokenizer([text for pair in corpus.train for text in pair])
    config = MarianConfig(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                          max_position_embeddings=POSITIONS, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id)
    evaluator = hf.NBestEvaluator(gold, tok, [p.text for p in corpus.gold][:VALIDATED], num_beams=3, max_len_a=0,
                                  max_len_b=6, batch_size=2, metrics=["map", "bleu_1x1", "wf1"])
    paths, logged = [], []
    for step in (10, 20):
        import torch

        torch.manual_seed(step)
        model = MarianMTModel(config).eval()
        path = root / "out" / f"checkpoint-{step}"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        hf_settings.save_settings(path, evaluator)
        logged.append(evaluator.evaluate(model).values)
        paths.append(path)
    evaluator.close()
    return gold, paths, logged


def _select(capsys, *argv):
    code = main(["select", "--hf", *map(str, argv), "--json", "--no-cache"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_select_hf_reproduces_what_the_callback_scored(hf_checkpoints, capsys):
    gold, paths, logged = hf_checkpoints
    code, table, err = _select(capsys, *paths, "--gold", gold)
    assert code == 0, err
    assert f"scoring the {VALIDATED} prompts the run validated on, of 8 in the gold" in err
    assert "beam 3" in err and "max_len_b 6" in err
    assert "Loading weights" not in err  # no transformers bar per checkpoint amid select's lines
    for system, values in zip(table["systems"], logged):
        for key in ("map", "bleu_1x1", "wf1"):
            assert system["values"][key] == pytest.approx(values[key], rel=1e-9, abs=1e-12), (system["name"], key)


def test_a_length_beyond_the_models_positions_is_refused_naming_the_option(hf_checkpoints, capsys):
    gold, paths, _ = hf_checkpoints
    code, _, err = _select(capsys, paths[0], "--gold", gold, "--max-len-b", "200")
    assert code == 2 and "--max-len-b 200 overrides the run's 6" in err
    assert "= 0 * " in err and " + 200 = 200 new tokens: more than the model's 16 positions" in err
    assert "lower --max-len-b (or --max-len-a) so that --max-len-a * " in err and f"+ --max-len-b <= {POSITIONS}" in err
    assert "IndexError" not in err


def test_select_allows_as_many_new_tokens_as_positions_as_the_callback_does(hf_checkpoints, capsys):
    """A Marian decoder is fed its start token and all but the last new token: 16 new tokens fit 16
    positions (the callback accepts them; test_hf_models shows generate making them); 17 do not."""
    gold, paths, _ = hf_checkpoints
    code, table, err = _select(capsys, paths[0], "--gold", gold, "--max-len-b", str(POSITIONS),
                               "--batch-size", "8")
    assert code == 0, err
    code, _, err = _select(capsys, paths[0], "--gold", gold, "--max-len-b", str(POSITIONS + 1))
    assert code == 2 and f"{POSITIONS + 1} new tokens: more than the model's {POSITIONS} positions" in err


def test_without_the_record_every_generation_setting_must_be_given(hf_checkpoints, capsys, tmp_path):
    import shutil

    gold, paths, _ = hf_checkpoints
    bare = tmp_path / "checkpoint-10"
    shutil.copytree(paths[0], bare)
    (bare / hf_settings.SETTINGS_FILE).unlink()
    code, _, err = _select(capsys, bare, "--gold", gold)
    assert code == 2 and "records no value for --beam, --max-len-a, --max-len-b, --lenpen" in err
    assert "--beam 10 --max-len-a 0 --max-len-b 64 --lenpen 1.0" in err  # NBestEvalCallback's defaults, to copy
    code, _, err = _select(capsys, bare, "--gold", gold, "--beam", "8", "--max-len-a", "0", "--max-len-b", "64",
                           "--lenpen", "1")
    assert code == 2 and "= 0 * " in err and " + 64 = 64 new tokens" in err
    assert f"--max-len-b <= {POSITIONS}" in err


def test_select_shows_progress_over_checkpoints_and_within_one(hf_checkpoints, capsys, monkeypatch):
    """On a terminal: a bar over the checkpoints and one over each checkpoint's prompts (on stderr, so
    --json stays parseable), once the work lasts PROGRESS_DELAY_S (0 here)."""
    from nbest_eval.cli import common

    monkeypatch.setattr(common, "PROGRESS_DELAY_S", 0)
    monkeypatch.setattr(common, "progress_shown", lambda: True)
    gold, paths, _ = hf_checkpoints
    code, table, err = _select(capsys, *paths, "--gold", gold)
    assert code == 0 and len(table["systems"]) == 2
    assert "checkpoint-20: " in err and f"/{VALIDATED} [" in err and "prompt/s" in err  # one checkpoint's prompts
    assert "checkpoints: 100%|" in err and "2/2 [" in err


def test_an_override_is_said_as_given_not_as_recorded(hf_checkpoints, capsys):
    """Issue 29 trial: with --beam given, select said "generating as X's run recorded: beam 4" though the
    run recorded 3; each value now says where it came from."""
    gold, paths, _ = hf_checkpoints
    code, _, err = _select(capsys, paths[0], "--gold", gold, "--beam", "4", "--metrics", "map")
    assert code == 0, err
    assert "--beam 4 overrides the run's 3" in err
    assert f"generating with {paths[0]}'s recorded settings and your options: beam 4 (given), nbest_size 3, " in err
    assert "run recorded" not in err
    code, _, err = _select(capsys, paths[0], "--gold", gold, "--metrics", "map")
    assert f"generating as {paths[0]}'s run recorded: beam 3, " in err and "(given)" not in err


@pytest.fixture(scope="module")
def no_tokenizer(tmp_path_factory):
    """A tiny T5 checkpoint directory as save_pretrained writes the model alone (no tokenizer files),
    a directory with nothing, and a gold."""
    pytest.importorskip("tokenizers")
    root = tmp_path_factory.mktemp("hf_no_tokenizer")
    tokenizer = hf_toy.build_tokenizer(["hi bye olá tchau"])
    hf_toy.build_model(tokenizer, d_model=16, layers=1, heads=2, ffn=32).save_pretrained(root / "checkpoint-1")
    (root / "empty").mkdir()
    write_gold(Gold([GoldPrompt("p1", "hi", (("olá", 1.0),)), GoldPrompt("p2", "bye", (("tchau", 1.0),))]),
               root / "gold.txt")
    return root


TOKENIZER_REFUSED = {  # extra select arguments ({r}: the folder) -> the directory the error names
    "its own": ([], "{r}/checkpoint-1"),
    "--tokenizer without one": (["--tokenizer", "{r}/empty"], "{r}/empty"),
}


@pytest.mark.parametrize("extra, where", TOKENIZER_REFUSED.values(), ids=TOKENIZER_REFUSED.keys())
def test_a_checkpoint_without_tokenizer_files_is_refused_naming_it(no_tokenizer, capsys, extra, where):
    before = sorted(no_tokenizer.rglob("*"))
    # every generation setting given: the checkpoint records none (it has no nbest_eval.json)
    argv = ["select", "--hf", "{r}/checkpoint-1", "--gold", "{r}/gold.txt", "--beam", "2", "--max-len-a", "0",
            "--max-len-b", "8", "--lenpen", "1", *extra]
    assert main([a.format(r=no_tokenizer) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{where.format(r=no_tokenizer)}: no tokenizer files (none of tokenizer.json, " in err, err
    assert "blank tokenizer" in err and "Traceback" not in err, err
    assert sorted(no_tokenizer.rglob("*")) == before  # no cache, no output
