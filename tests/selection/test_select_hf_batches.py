"""`nbest-eval select --hf` makes the batches the callback made: the recorded batch_size and
batch_tokens (issue 30), --batch-tokens overriding them (and saying so), and a record of an older
version, which has no batch_tokens, read as the batch_size it recorded."""

import json

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")
from experiments import hf_toy  # noqa: E402
from nbest_eval.analysis.synth import generate  # noqa: E402
from nbest_eval.cli import main  # noqa: E402
from nbest_eval.formats import read_gold, write_gold  # noqa: E402
from nbest_eval.hf import settings as hf_settings  # noqa: E402

pytestmark = pytest.mark.training


def recorded_checkpoint(root, seed, **evaluator_options):
    """A tiny Marian checkpoint in ``root`` (a gold of the synthetic corpus beside it) whose
    nbest_eval.json records an evaluator built with ``evaluator_options``: (gold, path, evaluator)."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    corpus = generate(seed=seed, train_pairs=50, valid_prompts=10)
    gold = root / "gold.txt"
    write_gold(corpus.gold, gold)
    tok = hf_toy.build_tokenizer([text for pair in corpus.train for text in pair])
    config = MarianConfig(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                          decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                          eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id)
    evaluator = hf.NBestEvaluator(gold, tok, num_beams=3, max_new_tokens=6, metrics=["map"], **evaluator_options)
    torch.manual_seed(seed)
    path = root / "checkpoint-5"
    MarianMTModel(config).eval().save_pretrained(path)
    tok.save_pretrained(path)
    hf_settings.save_settings(path, evaluator)
    return gold, path, evaluator


def select_hf(capsys, *argv):
    """`select --hf ARGV --json`: (exit status, the JSON on success, stderr)."""
    code = main(["select", "--hf", *map(str, argv), "--json", "--no-cache"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


@pytest.fixture(scope="module")
def hf_budget_checkpoint(tmp_path_factory):
    """A tiny Marian checkpoint whose evaluator batched by a token budget, and that evaluator."""
    return recorded_checkpoint(tmp_path_factory.mktemp("select_hf_batches"), 2, batch_tokens=60)


def test_select_generates_in_the_recorded_batches(hf_budget_checkpoint, capsys):
    gold, path, evaluator = hf_budget_checkpoint
    assert len(evaluator.batches()) > 2  # the budget splits the prompts
    model, _ = hf.load_model(path)
    loop = evaluator.evaluate(model, gather_nbest=True)
    assert hf.checkpoint_nbest(path, read_gold(gold), device="cpu") == loop.nbest
    code, table, err = select_hf(capsys, path, "--gold", gold, "--metrics", "map")
    assert code == 0, err
    assert "batch_size none, batch_tokens 60" in err
    assert table["systems"][0]["values"]["map"] == pytest.approx(loop.values["map"], rel=1e-9, abs=1e-12)
    code, _, err = select_hf(capsys, path, "--gold", gold, "--metrics", "map", "--batch-tokens", "7")
    assert code == 0 and "--batch-tokens 7 overrides the run's 60" in err


def test_an_older_record_keeps_the_batch_size_it_recorded(hf_budget_checkpoint, tmp_path):
    """Before batch_tokens, a record had batch_size (32 by default): the batches of 32 prompts it made."""
    import shutil

    gold, path, _ = hf_budget_checkpoint
    old = tmp_path / "checkpoint-5"
    shutil.copytree(path, old)
    settings = old / "nbest_eval.json"
    record = json.loads(settings.read_text())
    for key in ("batch_tokens", "precision"):
        del record["evaluator"][key]
    record["evaluator"]["batch_size"] = 4
    settings.write_text(json.dumps(record))
    recorded = hf.checkpoints.recorded_settings(old)
    assert recorded["batch_size"] == 4 and "batch_tokens" not in recorded
    _, tokenizer = hf.load_model(old)
    rebuilt = hf_settings.evaluator_from_settings(hf_settings.read_settings(old), read_gold(gold), tokenizer)
    assert (rebuilt.batch_size, rebuilt.batch_tokens, rebuilt.precision) == (4, None, None)
    assert [len(batch) for batch in rebuilt.batches()] == [4, 4, 2]
