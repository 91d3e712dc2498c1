"""`nbest-eval select --hf` says the precision it replays (issue 30: the header listed beam, batches
and prompts, not the bf16 it applied), checkpoints that recorded different precisions are refused,
and a batch option below 1 is refused at the option, not blamed on the checkpoint's record."""

import json
import shutil

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from experiments import hf_toy  # noqa: E402
from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main  # noqa: E402
from nbest_eval.formats import write_gold  # noqa: E402
from nbest_eval.hf import settings as hf_settings  # noqa: E402

pytestmark = pytest.mark.training


@pytest.fixture(scope="module")
def bf16_hf_checkpoint(tmp_path_factory):
    """A tiny Marian checkpoint whose evaluator generated under bf16 autocast (the CPU has it), the gold,
    and that evaluator."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    root = tmp_path_factory.mktemp("select_hf_precision")
    corpus = generate(seed=3, train_pairs=40, valid_prompts=6)
    gold = root / "gold.txt"
    write_gold(corpus.gold, gold)
    tok = hf_toy.build_tokenizer([text for pair in corpus.train for text in pair])
    config = MarianConfig(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                          decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id)
    evaluator = hf.NBestEvaluator(gold, tok, num_beams=3, max_new_tokens=6, precision="bf16", metrics=["map"])
    torch.manual_seed(5)
    path = root / "checkpoint-7"
    MarianMTModel(config).eval().save_pretrained(path)
    tok.save_pretrained(path)
    hf_settings.save_settings(path, evaluator)
    return gold, path, evaluator


def _select_hf(capsys, *argv):
    code = main(["select", "--hf", *map(str, argv), "--json", "--no-cache"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_select_says_the_recorded_precision_and_scores_in_it(bf16_hf_checkpoint, capsys):
    gold, path, evaluator = bf16_hf_checkpoint
    assert hf.checkpoints.recorded_settings(path)["precision"] == "bf16"
    model, _ = hf.load_model(path, "cpu")
    loop = evaluator.evaluate(model)
    code, table, err = _select_hf(capsys, path, "--gold", gold, "--metrics", "map")
    assert code == 0, err
    header = next(line for line in err.splitlines() if "generating as" in line)
    assert "batch_tokens none, precision bf16, prompts " in header
    assert table["systems"][0]["values"]["map"] == pytest.approx(loop.values["map"], rel=1e-9, abs=1e-12)


def test_a_record_without_precision_is_said_as_none(bf16_hf_checkpoint, tmp_path, capsys):
    """A record of a version before precision generated without autocast: "none", as the other unset values."""
    gold, path, _ = bf16_hf_checkpoint
    old = tmp_path / "checkpoint-7"
    shutil.copytree(path, old)
    settings = old / "nbest_eval.json"
    record = json.loads(settings.read_text())
    del record["evaluator"]["precision"]
    settings.write_text(json.dumps(record))
    code, _, err = _select_hf(capsys, old, "--gold", gold, "--metrics", "map")
    assert code == 0, err
    assert "precision none, prompts " in err


def test_checkpoints_that_recorded_different_precisions_are_refused(bf16_hf_checkpoint, tmp_path, capsys):
    gold, path, _ = bf16_hf_checkpoint
    other = tmp_path / "checkpoint-9"
    shutil.copytree(path, other)
    settings = other / "nbest_eval.json"
    record = json.loads(settings.read_text())
    record["evaluator"]["precision"] = "fp32"
    settings.write_text(json.dumps(record))
    code, _, err = _select_hf(capsys, path, other, "--gold", gold, "--metrics", "map")
    assert code == 2
    assert "recorded different precision (bf16 and fp32): score them in separate runs" in err


@pytest.mark.parametrize("option", ["--batch-tokens", "--batch-size"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_batch_option_below_one_is_refused_at_the_option(bf16_hf_checkpoint, capsys, option, value):
    """Issue 30: --batch-tokens 0 reached the evaluator, which blamed the checkpoint's nbest_eval.json."""
    gold, path, _ = bf16_hf_checkpoint
    with pytest.raises(SystemExit) as exit:
        main(["select", "--hf", str(path), "--gold", str(gold), f"{option}={value}", "--no-cache"])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    assert f"argument {option}: expected an integer >= 1, got '{value}'" in err
    assert "nbest_eval.json" not in err
