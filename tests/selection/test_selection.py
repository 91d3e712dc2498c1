"""Checkpoint ordering, the best of equal values, cache, links (early stopping: test_early_stopping.py)."""

import os

import pytest
from cases import random_case

from nbest_eval import InputError, Scorer
from nbest_eval.selection import best_index
from nbest_eval.selection.cache_entry import CacheEntry, relevance
from nbest_eval.selection.checkpoint_files import ScoreCache, checkpoint_order, drop_aliases, link_best


def test_checkpoint_order_is_numeric():
    names = ["ck/checkpoint10.pt", "ck/checkpoint2.pt", "ck/checkpoint1.pt", "ck/checkpoint_2_1000.pt",
             "ck/checkpoint_1_500.pt"]
    assert checkpoint_order(names) == ["ck/checkpoint_1_500.pt", "ck/checkpoint1.pt", "ck/checkpoint_2_1000.pt",
                                       "ck/checkpoint2.pt", "ck/checkpoint10.pt"]
    assert checkpoint_order(["o/checkpoint-1000", "o/checkpoint-500/"]) == ["o/checkpoint-500/", "o/checkpoint-1000"]


def test_mid_epoch_checkpoints_come_before_their_epoch_end():
    names = ["checkpoint1.pt", "checkpoint2.pt", "checkpoint_1_250.pt", "checkpoint_1_500.pt", "checkpoint_2_1000.pt"]
    assert checkpoint_order(names) == ["checkpoint_1_250.pt", "checkpoint_1_500.pt", "checkpoint1.pt",
                                       "checkpoint_2_1000.pt", "checkpoint2.pt"]


def test_aliases_are_dropped():
    names = ["checkpoint1.pt", "checkpoint_best.pt", "checkpoint_last.pt", "checkpoint.best_map_0.52.pt"]
    assert drop_aliases(names) == ["checkpoint1.pt"]


def test_best_index_prefers_the_latest_tie_like_checkpoint_best():
    assert best_index([0.1, 0.5, 0.3, 0.5, 0.2]) == 3
    assert best_index([3.0, 1.0, 1.0, 2.0], maximize=False) == 2
    assert best_index([None, None]) is None


def entry(value, stats=()):
    """A cache entry of the select cache: values, per-prompt statistics, the longest list."""
    return {"values": {"map": value}, "stats": [list(row) for row in stats], "nbest_size": 3}


def test_cache_scores_each_checkpoint_once_and_notices_changes(tmp_path):
    ckpt = tmp_path / "checkpoint1.pt"
    ckpt.write_bytes(b"weights")
    calls = []
    cache = ScoreCache(str(tmp_path / "cache.json"), {"metrics": "map"})
    assert cache.get_or_score(str(ckpt), lambda: calls.append(1) or entry(0.5)) == entry(0.5)
    again = ScoreCache(str(tmp_path / "cache.json"), {"metrics": "map"})
    assert again.get_or_score(str(ckpt), lambda: calls.append(1) or entry(0.7)) == entry(0.5)
    assert len(calls) == 1
    other_options = ScoreCache(str(tmp_path / "cache.json"), {"metrics": "map,rr"})
    assert other_options.get_or_score(str(ckpt), lambda: entry(0.6)) == entry(0.6)
    ckpt.write_bytes(b"new weights!")
    os.utime(ckpt, ns=(1, 1))
    assert again.get_or_score(str(ckpt), lambda: entry(0.9)) == entry(0.9)


@pytest.mark.parametrize("stored", [
    lambda good: good["values"],  # a 0.2.0 entry: values only
    lambda good: {**good, "stats": good["stats"][:1]},  # one prompt, where the gold has two
    lambda good: {**good, "stats": [good["stats"][0], good["stats"][1][:-1]]},  # a short row
    lambda good: {**good, "stats": [good["stats"][0], good["stats"][1][:-1] + ["x"]]},
    lambda good: {**good, "nbest_size": -1},
    lambda good: {**good, "values": {"map": "high"}},
])
def test_cache_entries_of_another_shape_are_scored_again(tmp_path, stored):
    gold, nbest = random_case(1, n_prompts=2, nil_prompts=False)
    scorer = Scorer(["map"])
    good = CacheEntry.of(scorer.score(gold, nbest, keep_per_prompt=True), scorer)
    ckpt = tmp_path / "checkpoint1.pt"
    ckpt.write_bytes(b"weights")
    cache = ScoreCache(str(tmp_path / "cache.json"), {},
                       lambda raw: CacheEntry.verified(raw, scorer, relevance(scorer, gold)), CacheEntry.as_json)
    cache.entries[cache.key(str(ckpt))] = stored(good.as_json())
    assert cache.get_or_score(str(ckpt), lambda: good) == good
    assert cache.get_or_score(str(ckpt), lambda: None) == good  # the repaired entry is used


@pytest.mark.parametrize("content", ["{not json", "[]"])
def test_unreadable_cache_is_an_error_naming_it(tmp_path, content):
    (tmp_path / "cache.json").write_text(content)
    with pytest.raises(InputError, match="cache.json"):
        ScoreCache(str(tmp_path / "cache.json"), {})


def test_unwritable_cache_is_an_error_naming_it(tmp_path):
    ckpt = tmp_path / "checkpoint1.pt"
    ckpt.write_bytes(b"w")
    cache = ScoreCache(str(tmp_path / "missing-dir" / "cache.json"), {})
    with pytest.raises(InputError, match="--no-cache"):
        cache.get_or_score(str(ckpt), lambda: entry(0.5))


def test_link_best_never_replaces_real_files(tmp_path):
    target = tmp_path / "checkpoint3.pt"
    target.write_bytes(b"w")
    link = tmp_path / "best.pt"
    assert link_best(str(target), str(link)) == "link"
    assert os.path.realpath(link) == str(target)
    with pytest.raises(InputError, match="already exists; refusing to overwrite it$"):
        link_best(str(target), str(link))
    other = tmp_path / "checkpoint4.pt"
    other.write_bytes(b"v")
    link_best(str(other), str(link), force=True)
    assert os.path.realpath(link) == str(other)
    with pytest.raises(InputError, match="not a link"):
        link_best(str(target), str(other), force=True)
    assert other.read_bytes() == b"v"
