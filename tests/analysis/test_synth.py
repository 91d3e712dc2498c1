"""The synthetic corpus: determinism, held-out prompts, complete weighted gold sets, files and CLI."""

import hashlib
import math
import random
import statistics

import pytest
from cases import SYNTH_CORPUS

from nbest_eval.analysis.synth import (
    FILES,
    GOLD_FILE,
    generate,
    sample_source,
    sample_translation,
    source_space,
    translation_distribution,
    write_corpus,
)
from nbest_eval.cli import main
from nbest_eval.data import InputError


def parse_gold(text):
    """An independent reading of the STAPLE gold format: {id: (prompt, [(translation, weight)])}."""
    gold = {}
    for block in text.strip("\n").split("\n\n"):
        head, *rows = block.split("\n")
        prompt_id, prompt = head.split("|")
        gold[prompt_id] = (prompt, [(t, float(w)) for t, w in (row.split("|") for row in rows)])
    return gold


def test_deterministic_per_seed(synth):
    again = generate(**SYNTH_CORPUS)
    assert again.train == synth.train and again.valid == synth.valid
    assert [p.translations for p in again.gold] == [p.translations for p in synth.gold]
    other = generate(**{**SYNTH_CORPUS, "seed": SYNTH_CORPUS["seed"] + 1})
    assert other.train != synth.train and other.valid != synth.valid


def test_valid_prompts_are_held_out(synth):
    sources = [src for src, _ in synth.valid]
    assert len(set(sources)) == len(sources) == SYNTH_CORPUS["valid_prompts"]
    assert not set(sources) & {src for src, _ in synth.train}
    with pytest.raises(InputError):
        generate(seed=7, train_pairs=0, valid_prompts=source_space())


def test_train_targets_are_valid_translations(synth):
    for src, tgt in synth.train:
        assert tgt in dict(translation_distribution(src))


def test_gold_sets_are_complete_sorted_distributions(synth):
    for prompt, (src, top) in zip(synth.gold, synth.valid):
        assert prompt.text == src
        assert prompt.id == "prompt_" + hashlib.md5(src.lower().encode("utf-8")).hexdigest()
        assert list(prompt.translations) == translation_distribution(src)
        weights = [w for _, w in prompt.translations]
        assert math.isclose(sum(weights), 1.0, abs_tol=1e-12)
        assert weights == sorted(weights, reverse=True) and min(weights) > 0
        assert top == prompt.translations[0][0]
        assert len({t for t, _ in prompt.translations}) == len(weights)


def test_weights_are_zipf_products():
    dist = dict(translation_distribution("i found the king"))
    # mi kept (2/3) or dropped (1/3); SOV (2/3) or SVO (1/3); ko (2/3); bare verb (2/3)
    assert dist["mi rego ko trovi"] == pytest.approx((2 / 3) ** 4)
    assert dist["rego trovi"] == pytest.approx(1 / 3 * 2 / 3 * 1 / 3 * 2 / 3)
    assert len(dist) == 16


def test_sampling_follows_the_distribution():
    source = "you helped the big dog today"
    rng = random.Random(0)
    drawn = [sample_translation(source, rng) for _ in range(20000)]
    for text, weight in translation_distribution(source)[:20]:
        assert drawn.count(text) / len(drawn) == pytest.approx(weight, abs=0.01)


def test_translation_counts_and_lengths_in_range():
    rng = random.Random(0)
    sources = {sample_source(rng) for _ in range(1000)}
    counts = [len(translation_distribution(src)) for src in sources]
    assert min(counts) >= 8 and 50 <= statistics.median(counts) <= 100
    assert sum(20 <= c <= 300 for c in counts) >= 0.8 * len(counts)
    assert all(3 <= len(src.split()) <= 10 for src in sources)
    assert len(sources) > 900  # the grammar is large: few repeats even in a small sample


def test_rejects_sentences_outside_the_grammar():
    for bad in ["", "the cat", "the cat saw", "cat saw the dog", "the cat saw the dog the", "the cat saw he"]:
        with pytest.raises(InputError):
            translation_distribution(bad)


def test_written_files(tmp_path, synth):
    write_corpus(tmp_path, synth)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)
    read = lambda name: (tmp_path / name).read_text(encoding="utf-8")  # noqa: E731
    assert read("train.src").splitlines() == [s for s, _ in synth.train]
    assert read("train.tgt").splitlines() == [t for _, t in synth.train]
    assert read("valid.src").splitlines() == [s for s, _ in synth.valid]
    assert read("valid.tgt").splitlines() == [t for _, t in synth.valid]
    gold = parse_gold(read(GOLD_FILE))
    assert list(gold) == synth.gold.ids()
    for prompt in synth.gold:
        assert gold[prompt.id] == (prompt.text, list(prompt.translations))  # repr(float) round-trips
    assert f"(seed {SYNTH_CORPUS['seed']})" in read("README.txt")


def test_refuses_non_empty_dir_without_force(tmp_path, synth):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match=str(tmp_path)):
        write_corpus(tmp_path, synth)
    write_corpus(tmp_path, synth, force=True)
    assert (tmp_path / "keep.txt").read_text() == "mine" and (tmp_path / GOLD_FILE).exists()


def test_cli(tmp_path, capsys):
    args = ["synth", "--seed", "3", "--train-pairs", "50", "--valid-prompts", "5"]
    assert main(args + [str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "50 train pairs" in out and "5 valid prompts" in out and "min/median/max" in out
    assert main(args + [str(tmp_path / "b")]) == 0
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert main(args + [str(tmp_path / "a")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(args + ["--force", str(tmp_path / "a")]) == 0
