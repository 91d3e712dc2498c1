"""scripts.staple_en_pt (experiments/staple/): the pair construction, the splits, the tokenizer, the
selection analysis, and a small smoke run of each framework through the same code path as the full
runs (the parts on the real STAPLE data skip without it)."""

import json
import os
from pathlib import Path

import pytest

from experiments.staple import cli, hf_run, scoring, settings
from experiments.staple import data as staple_data
from experiments.staple import selection as staple_selection
from nbest_eval import score
from nbest_eval.data import Gold, GoldPrompt, InputError, prompt_id
from nbest_eval.formats import read_gold
from nbest_eval.training.early_stopping import RULES, EarlyStopping

REPO = Path(__file__).resolve().parents[2]

GOLD_NAME = "dev.en_pt.2020-02-20.gold.txt"


def release_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


# -- pairs and splits ---------------------------------------------------------------------------


def write_training_files(directory, aws_blocks):
    top = directory / settings.TRAIN_TOP
    top.write_text("i eat.|eu como.\nthe cat.|o gato.\nwhere is it?|onde está?\n", encoding="utf-8")
    aws = directory / settings.TRAIN_AWS
    aws.write_text("\n\n".join(f"{prompt_id(p)}|{p}\n{t}" for p, t in aws_blocks) + "\n", encoding="utf-8")
    return top, aws


def test_training_pairs_are_both_translations_lowercased_without_repeats(tmp_path):
    from nbest_eval.formats import read_nbest

    top, aws = write_training_files(tmp_path, [("the cat.", "O Gato."), ("i eat.", "Eu Como Bem."),
                                               ("where is it?", "Onde fica?")])
    prompts = staple_data.read_top_translations(top)
    pairs = staple_data.training_pairs(prompts, read_nbest(str(aws), prompts, "staple"), str(aws))
    assert pairs == [("i eat.", "eu como."), ("i eat.", "eu como bem."), ("the cat.", "o gato."),
                     ("where is it?", "onde está?"), ("where is it?", "onde fica?")]


def test_bad_training_files_are_named(tmp_path):
    from nbest_eval.formats import read_nbest

    top, aws = write_training_files(tmp_path, [("the cat.", "O gato."), ("i eat.", "Eu como.")])
    prompts = staple_data.read_top_translations(top)
    with pytest.raises(InputError, match=f"^{aws}: no translation of the training prompt 'where is it\\?'"):
        staple_data.training_pairs(prompts, read_nbest(str(aws), prompts, "staple"), str(aws))
    top.write_text("i eat.|eu como.\nno bar here\n", encoding="utf-8")
    with pytest.raises(InputError, match=f"^{top}:2: expected '<english prompt>|<translation>'"):
        staple_data.read_top_translations(top)
    top.write_text("i eat.|eu como.\n", encoding="utf-8")
    with pytest.raises(InputError, match=str(aws)):  # a prompt the training file lacks
        read_nbest(str(aws), staple_data.read_top_translations(top), "staple")


def test_the_real_training_pairs(staple_dir, en_pt_gold):
    corpus = staple_data.real_corpus(staple_dir, en_pt_gold, None, None)
    assert corpus.train_prompts == 4000 and len(corpus.valid) == 500
    assert corpus.valid is en_pt_gold  # all of the dev gold, as read
    # the data README: 6,496 distinct pairs, the two translations agreeing on 1,504 prompts
    assert len(corpus.pairs) == len(set(corpus.pairs)) == 6496
    prompts = [line.split("|", 1)[0] for line in release_lines(staple_dir / settings.TRAIN_TOP)]
    per_prompt = {p: sum(s == p for s, _ in corpus.pairs) for p in prompts}
    assert sorted(per_prompt.values()).count(1) == 1504 and set(per_prompt.values()) == {1, 2}
    assert all(t == t.lower() for _, t in corpus.pairs)
    assert not {p.text for p in en_pt_gold} & {s for s, _ in corpus.pairs}
    top = dict(line.split("|", 1) for line in release_lines(staple_dir / settings.TRAIN_TOP))
    assert all((p, t) in set(corpus.pairs) for p, t in top.items())
    assert set(corpus.sentences) == set(prompts) | {t for _, t in corpus.pairs}

    small = staple_data.real_corpus(staple_dir, en_pt_gold, 10, 7)
    assert small.train_prompts == 10 and {s for s, _ in small.pairs} == set(prompts[:10])
    assert [p.id for p in small.valid] == [p.id for p in en_pt_gold if p.id in {q.id for q in small.valid}]
    assert {p.id for p in small.valid} == {p.id for p in staple_data.split_prompts(en_pt_gold, 7, 1)[1]}


def test_dev_prompts_are_a_fixed_subset_in_gold_order():
    gold = Gold([GoldPrompt(f"p{i}", f"prompt {i}", ((f"t{i}", 1.0),)) for i in range(20)], "g.txt")
    five = staple_data.dev_prompts(gold, 5)
    assert len(five) == 5 and set(five.ids()) <= set(gold.ids())
    assert five.ids() == [pid for pid in gold.ids() if pid in set(five.ids())]
    assert set(staple_data.dev_prompts(gold, 3).ids()) < set(five.ids())
    assert staple_data.dev_prompts(gold, None) is gold and staple_data.dev_prompts(gold, 20) is gold
    with pytest.raises(InputError, match="21 validation prompts asked, the gold has 20"):
        staple_data.dev_prompts(gold, 21)


def test_the_split_is_fixed_disjoint_and_sized(en_pt_gold):
    train, valid = staple_data.split_prompts(en_pt_gold, 100, 400)
    assert (len(train), len(valid)) == (400, 100)
    assert not {p.id for p in train} & {p.id for p in valid}
    again_train, again_valid = staple_data.split_prompts(en_pt_gold, 100, 400)
    assert [p.id for p in again_valid] == [p.id for p in valid]
    # a smaller split holds out the same first prompts: the order depends on the ids only
    _, fewer = staple_data.split_prompts(en_pt_gold, 10, 20)
    assert [p.id for p in fewer] == [p.id for p in valid][:10]
    with pytest.raises(InputError, match="the gold has 500"):
        staple_data.split_prompts(en_pt_gold, 101, 400)


def test_pairs_follow_the_weights_and_the_seed(en_pt_gold):
    train, _ = staple_data.split_prompts(en_pt_gold, 100, 400)
    pairs = staple_data.sample_pairs(train, 50, seed=1)
    assert len(pairs) == 400 * 50
    assert pairs == staple_data.sample_pairs(train, 50, seed=1)
    assert pairs != staple_data.sample_pairs(train, 50, seed=2)
    valid_translations = {(p.text, t) for p in train for t, _ in p.translations}
    assert set(pairs) <= valid_translations
    # the most frequent translation is drawn about as often as its weight says
    top = {p.text: p.translations[0] for p in train}
    share = sum(t == top[s][0] for s, t in pairs) / len(pairs)
    expected = sum(p.translations[0][1] / sum(w for _, w in p.translations) for p in train) / len(train)
    assert abs(share - expected) < 0.02, (share, expected)


def test_the_dev_split_corpus(en_pt_gold):
    corpus = staple_data.dev_corpus(en_pt_gold, 400, 100, 5, seed=1)
    train, valid = staple_data.split_prompts(en_pt_gold, 100, 400)
    assert (corpus.train_prompts, len(corpus.pairs)) == (400, 2000)
    assert corpus.valid.ids() == valid.ids()
    assert {s for s, _ in corpus.pairs} == {p.text for p in train}
    assert set(corpus.sentences) == {p.text for p in train} | {t for p in train for t, _ in p.translations}


def test_the_aws_baseline_is_scored_from_its_file(staple_dir, en_pt_gold):
    baseline = scoring.score_baseline(staple_dir / settings.DEV_AWS, en_pt_gold, en_pt_gold)
    # the values the data README gives for the release's AWS 1-best on the 500 dev prompts
    assert baseline["n_prompts"] == 500 and baseline["n_empty"] == 0
    assert (round(baseline["map"], 4), round(baseline["p1"], 3), round(baseline["wf1"], 4)) == (0.0206, 0.868, 0.2115)
    assert set(settings.METRICS) <= set(baseline)
    _, held_out = staple_data.split_prompts(en_pt_gold, 100, 400)
    assert scoring.score_baseline(staple_dir / settings.DEV_AWS, en_pt_gold, held_out)["n_prompts"] == 100


def test_the_fast_tokenizer_gives_the_sentencepiece_ids(en_pt_gold, tmp_path):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("transformers")
    import sentencepiece as spm

    train, _ = staple_data.split_prompts(en_pt_gold, 100, 400)
    sentences = sorted({p.text for p in train} | {t for p in train for t, _ in p.translations})
    model = staple_data.train_sentencepiece(sentences, tmp_path / "spm", 500)
    tokenizer = hf_run.spm_tokenizer(model)
    pieces = spm.SentencePieceProcessor(model_file=str(model))
    texts = [t for p in en_pt_gold for t in [p.text] + [t for t, _ in p.translations]]  # held-out ones included
    for text in texts:
        ids = tokenizer(text)["input_ids"]
        assert ids == pieces.encode(text) + [tokenizer.eos_token_id], text
        assert tokenizer.decode(ids, skip_special_tokens=True) == text


# -- selection ----------------------------------------------------------------------------------


def test_the_hf_recipe_is_read_from_the_fairseq_configuration():
    config = settings.fairseq_config()
    recipe = hf_run.hf_recipe("fairseq")
    assert recipe["model"] == "transformer" and "--share-all-embeddings" in config and "--cpu" not in config
    pairs = {"d_model": "--encoder-embed-dim", "layers": "--encoder-layers", "heads": "--encoder-attention-heads",
             "ffn": "--encoder-ffn-embed-dim", "dropout": "--dropout", "label_smoothing": "--label-smoothing",
             "learning_rate": "--lr", "warmup_steps": "--warmup-updates", "max_grad_norm": "--clip-norm",
             "max_len_a": "--nbest-max-len-a", "max_len_b": "--nbest-max-len-b"}
    for field, option in pairs.items():
        assert recipe[field] == type(recipe[field])(config[option]), field
    assert config["--adam-betas"] == "(0.9,0.98)" and recipe["adam_betas"] == (0.9, 0.98)
    assert config["--decoder-embed-dim"] == config["--encoder-embed-dim"]  # one d_model for both
    assert hf_run.hf_recipe("t5")["model"] == "t5"


@pytest.mark.parametrize("recipe, device, expected", [
    # a run before recipes, and before --device
    (None, None, {"max_len_a": 0.0, "max_len_b": 48, "batch_size": 32, "generation_kwargs": {}}),
    ("t5", "cpu", {"max_len_a": 0.0, "max_len_b": 48, "batch_size": 32, "generation_kwargs": {}}),
    ("fairseq", "cpu", {"max_len_a": 1.5, "max_len_b": 5, "batch_size": 64,
                        "generation_kwargs": {"early_stopping": True}}),
    # on the GPU the evaluator's own batches (a token budget), as the run validated with
    ("fairseq", "cuda", {"max_len_a": 1.5, "max_len_b": 5, "batch_size": None,
                         "generation_kwargs": {"early_stopping": True}})])
def test_averages_are_generated_as_the_run_validated(recipe, device, expected, tmp_path):
    summary = {"framework": "hf", "beam": 16, **({"hf_recipe": recipe} if recipe else {}),
               **({"device": device} if device else {})}
    expected = {"framework": "hf", "average": 5, "beam": 16, **expected, "device": device}
    assert staple_selection.generation(summary, tmp_path, 5) == expected


def test_analyse_picks_peaks_and_replays_patience_on_the_saved_lists(tmp_path):
    """Two prompts; at each epoch rank 1 of 0, 1 or 2 of them is a valid translation, so MAP, P@1
    and BLEU 1x1 rise and fall with that count; the loss is given."""
    gold = Gold([GoldPrompt("a", "one", (("um", 0.7), ("uma", 0.3))),
                 GoldPrompt("b", "two", (("dois", 0.6), ("duas", 0.4)))], "gold.txt")
    hits = [0, 2, 1, 0, 0, 0, 2, 0]  # epochs 1..8
    loss = [5.0, 4.0, 3.0, 3.5, 3.6, 3.7, 3.8, 2.9]
    rows = []
    for epoch, (hit, value) in enumerate(zip(hits, loss), 1):
        lists = {"a": ["um" if hit >= 1 else "xx"], "b": ["dois" if hit == 2 else "yy"]}
        path = tmp_path / f"epoch{epoch}.tsv"
        path.write_text("".join(f"{pid}\t1\t-1.0\t{texts[0]}\n" for pid, texts in lists.items()))
        rows.append({"epoch": epoch, "step": 10 * epoch, "checkpoint": f"checkpoint{epoch}.pt", "nbest": str(path),
                     "loss": value, **dict.fromkeys(settings.METRICS, 0.0)})
    selection = staple_selection.analyse(tmp_path, rows, gold)
    measures = selection["measures"]
    assert set(measures) == {"map", "bleu_1x1", "bleu_100x100", "wf1", "loss"}
    # the latest of equal peaks, as fairseq's checkpoint_best.pt
    assert measures["map"]["peak"]["epoch"] == 7 and measures["map"]["peak"]["values"]["p1"] == 1.0
    patience = measures["map"]["patience"]
    assert (patience["3"]["stopped_at_epoch"], patience["3"]["keeps"]["epoch"]) == (5, 2)
    # epoch 7 only ties epoch 2: no improvement for patience, yet checkpoint_best.pt takes it
    assert (patience["5"]["stopped_at_epoch"], patience["5"]["keeps"]["epoch"]) == (7, 7)
    assert (patience["10"]["stopped_at_epoch"], patience["10"]["keeps"]["epoch"]) == (None, 7)
    assert measures["loss"]["maximize"] is False and measures["loss"]["peak"]["epoch"] == 8
    loss3 = measures["loss"]["patience"]["3"]
    assert (loss3["stopped_at_epoch"], loss3["keeps"]["epoch"]) == (6, 3)
    assert loss3["keeps"]["values"]["p1"] == 0.5  # the pick scored by the others
    assert [v["p1"] for v in selection["validations"]] == [h / 2 for h in hits]
    assert selection["largest_relative_gap_logged_vs_rescored"] == 1.0  # logged 0.0, re-scored P@1 1.0
    assert (tmp_path / "selection.txt").read_text().splitlines()[0].startswith("picked by")
    # epoch 7 ties itself and epoch 2 (the same lists: p = 1); the loss has no per-prompt statistics
    assert {2, 7} <= set(measures["map"]["tied_epochs"]) and measures["loss"]["tied_epochs"] is None
    for row in selection["validations"]:
        ci = row["ci"]["map"]
        assert ci["low"] <= row["map"] <= ci["high"] and ci["tied"] == (row["epoch"] in measures["map"]["tied_epochs"])


# -- the script end to end ----------------------------------------------------------------------


def test_a_missing_training_file_is_named(staple_dir, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name in (settings.DEV_GOLD, settings.DEV_AWS, settings.TRAIN_TOP):
        (data / name).symlink_to(staple_dir / name)
    code = cli.main(["--data", str(data), "--out", str(tmp_path / "run"), "--framework", "fairseq"])
    assert code == 2
    assert f"{data / settings.TRAIN_AWS}: missing" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_existing_output_directory_is_refused(staple_dir, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    code = cli.main(["--data", str(staple_dir), "--out", str(tmp_path), "--framework", "hf"])
    assert code == 2
    assert "not an empty directory" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["keep.txt"]


@pytest.mark.training
@pytest.mark.parametrize("framework", ["fairseq", "hf"])
def test_smoke_run_writes_a_summary_whose_lists_rescore_to_its_values(staple_dir, framework, tmp_path, monkeypatch):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("fairseq" if framework == "fairseq" else "transformers")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "run"
    code = cli.main(["--data", str(staple_dir), "--out", str(out), "--framework", framework,
                              "--epochs", "3", "--train-prompts", "40", "--valid-prompts", "8",
                              "--vocab-size", "300", "--beam", "4", "--average", "2",
                              "--patience", "1", "--stopping", "strict"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    top = [line.split("|", 1) for line in release_lines(staple_dir / settings.TRAIN_TOP)[:40]]
    assert (summary["split"], summary["train_prompts"], summary["valid_prompts"]) == ("train", 40, 8)
    assert set(release_lines(out / "data" / "train.src")) == {p for p, _ in top}
    assert summary["train_pairs"] == len(release_lines(out / "data" / "train.tgt")) > 40
    import torch

    on_cpu = not torch.cuda.is_available()  # --device auto
    assert (summary["device"], summary["precision"]) == ("cpu" if on_cpu else "cuda", "fp32")
    valid_tokens = 2000 if on_cpu else settings.CUDA_MAX_TOKENS_VALID  # fairseq's validation batches
    assert summary["max_tokens_valid"] == (None if framework == "hf" else valid_tokens)
    for name in ("map.png", "curves.png", "bleu-curves.png", "loss.png"):
        assert (out / name).stat().st_size > 0

    full = read_gold(staple_dir / GOLD_NAME)
    valid = read_gold(summary["valid_gold"])
    assert len(valid) == 8
    for prompt in valid:  # the real gold, unchanged
        assert (prompt.text, prompt.translations) == (full[prompt.id].text, full[prompt.id].translations)

    rows = summary["validations"]
    assert [r["epoch"] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 2
    for row in rows:
        assert row["n_prompts"] == 8  # every validation prompt found its gold by id and was scored
        assert row["gen_seconds"] > 0 and row["score_seconds"] >= 0 and row["loss"] > 0
        assert Path(row["checkpoint"]).exists()  # kept for selection and averaging
        nbest = Path(row["nbest"])
        assert nbest.suffix == ".tsv" and nbest.is_file()
        rescored = score(valid, nbest, metrics=settings.METRICS)
        for key in settings.METRICS:  # fairseq's json log prints 6 significant digits
            assert abs(row[key] - rescored.values[key]) <= 5e-6 * max(1.0, abs(rescored.values[key])), (key, row)
    if framework == "fairseq":
        assert (Path(summary["data_bin"]) / "dict.src.txt").is_file()

    aws = score(valid, {pid: hyps for pid, hyps in score_lists(staple_dir, full).items() if pid in valid},
                metrics=settings.METRICS)
    assert summary["baseline"]["n_prompts"] == 8
    assert all(summary["baseline"][k] == aws.values[k] for k in settings.METRICS)

    selection = summary["selection"]
    assert set(selection["measures"]) == set(settings.SELECTION)
    assert selection["largest_relative_gap_logged_vs_rescored"] <= 5e-6
    for result in selection["measures"].values():
        assert result["peak"]["epoch"] <= len(rows) and set(result["patience"]) == {"3", "5", "10"}

    # the run stopped in the loop where the rule, replayed on its own lists, stops, and kept the same epoch
    maps = [v["map"] for v in selection["validations"]]
    decisions, stopped = EarlyStopping("map", "strict", 1).replay(maps)
    in_loop = summary["early_stopping"]
    assert (in_loop["rule"], in_loop["patience"]) == ("strict", 1)
    assert in_loop["stopped_after"] == (None if stopped is None else stopped + 1)
    assert in_loop["kept"] == decisions[-1].kept + 1
    # every rule replayed at each patience; the strict ones are the per-measure patience replays
    replays = selection["stopping"]
    assert [(r["rule"], r["patience"]) for r in replays] == [(rule, p) for rule in RULES for p in (3, 5, 10)]
    for r in replays:
        assert 0 <= r["epochs_saved"] < 1 and 0 < r["map"]["p_vs_best"] <= 1
        if r["rule"] == "strict":
            same = selection["measures"]["map"]["patience"][str(r["patience"])]
            assert (r["stopped_after_epoch"], r["kept_epoch"]) == (same["stopped_at_epoch"], same["keeps"]["epoch"])
    assert set(summary["agreement_with_map"]) == {"bleu_1x1", "bleu_100x100", "wf1", "p1", "neg_loss"}
    assert all(summary["baseline"]["ci"][k]["low"] <= aws.values[k] <= summary["baseline"]["ci"][k]["high"]
               for k in ("bleu_1x1", "p1"))

    # the averages of the 2 best checkpoints by MAP and of the last 2: generated lists that re-score to
    # their reported values, p-values against the best single checkpoint
    averages = selection["averages"]
    assert set(averages) == {"best2_by_map", "last2", "best_single"}
    for name in ("best2_by_map", "last2"):
        assert len(set(averages[name]["epochs"])) == 2 and Path(averages[name]["path"]).exists()
        rescored = score(valid, averages[name]["nbest"], metrics=settings.METRICS)
        assert averages[name]["values"] == rescored.values
        assert all(0 < p <= 1 for p in averages[name]["p_vs_best_single"].values())

    # --analyse redoes the analysis from what the run saved: the same numbers
    assert cli.main(["--data", str(staple_dir), "--out", str(out), "--analyse", "--average", "2"]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["selection"] == selection and again["baseline"] == summary["baseline"]


def score_lists(staple_dir, en_pt_gold):
    from nbest_eval.formats import read_nbest

    return read_nbest(str(staple_dir / settings.DEV_AWS), en_pt_gold, "staple")
