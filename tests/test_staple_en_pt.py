"""scripts/staple_en_pt.py on the real STAPLE en_pt gold: the split, the tokenizer, and a small smoke
run of each framework through the same code path as the full runs (skipped without the data)."""

import json
import os
import sys
from pathlib import Path

import pytest

from nbest_eval import score
from nbest_eval.data import InputError
from nbest_eval.formats import read_gold

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import staple_en_pt  # noqa: E402

GOLD_NAME = "dev.en_pt.2020-02-20.gold.txt"


@pytest.fixture(scope="module")
def gold(staple_dir):
    return read_gold(staple_dir / GOLD_NAME)


def test_the_split_is_fixed_disjoint_and_sized(gold):
    train, valid = staple_en_pt.split_prompts(gold, 100, 400)
    assert (len(train), len(valid)) == (400, 100)
    assert not {p.id for p in train} & {p.id for p in valid}
    again_train, again_valid = staple_en_pt.split_prompts(gold, 100, 400)
    assert [p.id for p in again_valid] == [p.id for p in valid]
    # a smaller split holds out the same first prompts: the order depends on the ids only
    _, fewer = staple_en_pt.split_prompts(gold, 10, 20)
    assert [p.id for p in fewer] == [p.id for p in valid][:10]
    with pytest.raises(InputError, match="the gold has 500"):
        staple_en_pt.split_prompts(gold, 101, 400)


def test_pairs_follow_the_weights_and_the_seed(gold):
    train, _ = staple_en_pt.split_prompts(gold, 100, 400)
    pairs = staple_en_pt.sample_pairs(train, 50, seed=1)
    assert len(pairs) == 400 * 50
    assert pairs == staple_en_pt.sample_pairs(train, 50, seed=1)
    assert pairs != staple_en_pt.sample_pairs(train, 50, seed=2)
    valid_translations = {(p.text, t) for p in train for t, _ in p.translations}
    assert set(pairs) <= valid_translations
    # the most frequent translation is drawn about as often as its weight says
    top = {p.text: p.translations[0] for p in train}
    share = sum(t == top[s][0] for s, t in pairs) / len(pairs)
    expected = sum(p.translations[0][1] / sum(w for _, w in p.translations) for p in train) / len(train)
    assert abs(share - expected) < 0.02, (share, expected)


def test_the_fast_tokenizer_gives_the_sentencepiece_ids(gold, tmp_path):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("transformers")
    import sentencepiece as spm

    train, _ = staple_en_pt.split_prompts(gold, 100, 400)
    model = staple_en_pt.train_sentencepiece(train, tmp_path / "spm", 500)
    tokenizer = staple_en_pt.spm_tokenizer(model)
    pieces = spm.SentencePieceProcessor(model_file=str(model))
    texts = [t for p in gold for t in [p.text] + [t for t, _ in p.translations]]  # held-out ones included
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        assert ids == pieces.encode(text) + [tokenizer.eos_token_id], text
        assert tokenizer.decode(ids, skip_special_tokens=True) == text


@pytest.mark.training
@pytest.mark.parametrize("framework", ["fairseq", "hf"])
def test_smoke_run_writes_a_summary_whose_lists_rescore_to_its_values(staple_dir, framework, tmp_path, monkeypatch):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("fairseq" if framework == "fairseq" else "transformers")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "run"
    code = staple_en_pt.main(["--gold", str(staple_dir / GOLD_NAME), "--out", str(out), "--framework", framework,
                              "--epochs", "2", "--train-prompts", "30", "--valid-prompts", "6",
                              "--samples-per-prompt", "8", "--vocab-size", "300", "--beam", "4"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["train_prompts"], summary["valid_prompts"], summary["train_pairs"]) == (30, 6, 240)
    assert (out / "curves.png").stat().st_size > 0 and (out / "bleu-curves.png").stat().st_size > 0

    full = read_gold(staple_dir / GOLD_NAME)
    held_out = read_gold(summary["valid_gold"])
    assert [p.id for p in held_out] == [p.id for p in staple_en_pt.split_prompts(full, 6, 30)[1]]
    for prompt in held_out:  # the real gold, unchanged
        assert (prompt.text, prompt.translations) == (full[prompt.id].text, full[prompt.id].translations)
    assert not {p.text for p in held_out} & set((out / "data" / "train.src").read_text().splitlines())

    rows = summary["validations"]
    assert [r["epoch"] for r in rows] == [1, 2]
    for row in rows:
        assert row["n_prompts"] == 6  # every held-out prompt found its gold by id and was scored
        assert row["gen_seconds"] > 0 and row["score_seconds"] >= 0
        nbest = Path(row["nbest"])
        assert nbest.suffix == ".tsv" and nbest.is_file()
        rescored = score(held_out, nbest, metrics=staple_en_pt.METRICS)
        for key in staple_en_pt.METRICS:  # fairseq's json log prints 6 significant digits
            assert abs(row[key] - rescored.values[key]) <= 5e-6 * max(1.0, abs(rescored.values[key])), (key, row)
    assert set(summary["best_epoch"]) == set(staple_en_pt.METRICS)
    assert set(summary["agreement_with_map"]) == {"bleu_1x1", "bleu_100x100", "wf1"}
    assert all(a["n"] == 2 for a in summary["agreement_with_map"].values())


def test_an_existing_output_directory_is_refused(staple_dir, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    code = staple_en_pt.main(["--gold", str(staple_dir / GOLD_NAME), "--out", str(tmp_path), "--framework", "hf"])
    assert code == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["keep.txt"]
