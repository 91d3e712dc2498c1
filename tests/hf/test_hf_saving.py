"""NBestEvalCallback's save_dir: saving never stops training (issue 34, class 8). A full disk is
simulated by the writer's open (nbest_eval.files.output), which creates the file and then fails as a
write to a full disk does; no training, no model. A name or save_dir it could never write under is
refused when the callback is made, naming the option and the path, and nothing is written."""

from __future__ import annotations

import errno
import logging
import math
import os
import re

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")

from nbest_eval.data import Gold, GoldPrompt, Hyp, InputError  # noqa: E402
from nbest_eval.files import output  # noqa: E402
from nbest_eval.formats import read_nbest, write_gold  # noqa: E402

STEP = 40
GOLD = Gold([GoldPrompt(f"p{i}", f"source {i}", ((f"fonte {i}", 0.75), (f"origem {i}", 0.25))) for i in range(3)])


def full_disk(fails):
    """An ``open`` for the writer: the files whose name ``fails(name)`` accepts hit a full disk."""
    def fake_open(path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        if "x" in mode and fails(os.path.basename(path)):
            file.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return file
    return fake_open


def lists(score=-1.5):
    return {p.id: [Hyp(f"fonte {i}", score), Hyp("outra", -3.0)] for i, p in enumerate(GOLD)}


#: (case, save_format, prompts scored (None: all), files that hit a full disk, the lists' first score,
#:  a file already in save_dir, what is logged, the files in save_dir after)
CASES = [
    ("full disk, jsonl", "jsonl", None, lambda name: True, -1.5, None,
     r"step 40 not saved: .*nbest-step40.jsonl: cannot write: No space left on device.*training goes on", []),
    ("full disk, tsv", "tsv", None, lambda name: True, -1.5, None,
     r"step 40 not saved: .*No space left on device", []),
    ("full disk for the gold", "jsonl", 2, lambda name: name.startswith("gold"), -1.5, None,
     r"step 40 not saved: .*gold.txt: cannot write: No space left on device", []),
    ("-inf in jsonl: tsv instead", "jsonl", None, lambda name: False, -math.inf, None,
     r"step 40 saved as tsv instead of jsonl: .*-inf", ["nbest-step40.tsv"]),
    ("-inf in jsonl, and tsv hits a full disk", "jsonl", None, lambda name: name.endswith(".tsv"), -math.inf, None,
     r"^(?!.*instead).*step 40 not saved: .*No space left on device", []),
    ("save_dir replaced by a file", "jsonl", None, lambda name: False, -1.5, "",
     r"step 40 not saved: .*nbest: exists and is not a folder", None),
    ("an earlier run's gold of other prompts", "jsonl", 2, lambda name: False, -1.5, "gold.txt",
     r"gold.txt is the gold of other prompts .*: the gold of this run's n-best lists is .*gold-2.txt",
     ["gold-2.txt", "gold.txt", "nbest-step40.jsonl"]),
]


@pytest.mark.parametrize("case, save_format, max_prompts, fails, score, existing, logged, files", CASES,
                         ids=[c[0] for c in CASES])
def test_saving_never_stops_training(tmp_path, monkeypatch, caplog, case, save_format, max_prompts, fails, score,
                                     existing, logged, files):
    gold_file, save_dir = tmp_path / "gold.txt", tmp_path / "nbest"
    write_gold(GOLD, gold_file)
    if existing:
        save_dir.mkdir()
        write_gold(Gold([GoldPrompt("other", "other", (("outro", 1.0),))]), save_dir / existing)
    callback = hf.NBestEvalCallback(gold_file, save_dir=save_dir, save_format=save_format, max_prompts=max_prompts,
                                    metrics="map")
    result = hf.NBestResult({"map": 0.0}, callback.evaluator.scorer.zero(), 0.0, 0.0, 0)
    result.nbest = {pid: hyps for pid, hyps in lists(score).items() if pid in callback.evaluator.gold}
    if existing == "":  # since the callback checked it
        save_dir.write_text("a file where the folder was\n")
    monkeypatch.setattr(output, "open", full_disk(fails), raising=False)
    with caplog.at_level(logging.WARNING):
        callback._save(result, STEP)  # returns: training goes on
    assert any(re.search(logged, r.getMessage()) for r in caplog.records), caplog.text
    if files is not None:
        assert sorted(os.listdir(save_dir)) == files  # nothing half-written left behind
    assert callback.saved == [save_dir / name for name in files or [] if name.startswith("nbest")]
    monkeypatch.undo()  # the disk has room again: the next evaluation saves its lists and their gold
    if existing != "":
        callback._save(result, STEP + 1)
        saved = callback.saved[-1]
        gold = callback.evaluator.gold
        assert saved.name.startswith(f"nbest-step{STEP + 1}") and sorted(read_nbest(saved, gold)) == sorted(gold.ids())
        if max_prompts:
            assert any(name.startswith("gold") for name in os.listdir(save_dir))


def test_a_resumed_run_finds_its_own_gold(tmp_path, caplog):
    """A run resumed again with the same prompts finds their gold in gold-2.txt: no gold-3.txt."""
    gold_file, save_dir = tmp_path / "gold.txt", tmp_path / "nbest"
    write_gold(GOLD, gold_file)
    save_dir.mkdir()
    write_gold(Gold([GoldPrompt("other", "other", (("outro", 1.0),))]), save_dir / "gold.txt")
    for run in range(2):
        callback = hf.NBestEvalCallback(gold_file, save_dir=save_dir, max_prompts=2, metrics="map")
        result = hf.NBestResult({"map": 0.0}, callback.evaluator.scorer.zero(), 0.0, 0.0, 0)
        result.nbest = {pid: hyps for pid, hyps in lists().items() if pid in callback.evaluator.gold}
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            callback._save(result, STEP + run)
        assert "gold of other prompts" in caplog.text and caplog.text.rstrip().endswith("gold-2.txt")
    assert sorted(os.listdir(save_dir)) == ["gold-2.txt", "gold.txt", "nbest-step40.jsonl", "nbest-step41.jsonl"]


# -- name and save_dir are checked when the callback is made, not at the first evaluation --------------------

NOT_PLAIN = "is not a plain name"
CALLBACK_REFUSED = {  # NBestEvalCallback arguments ({t}: the folder) -> what the error says
    "name reaching up": ({"name": "../up", "save_dir": "{t}/out"}, NOT_PLAIN),
    "name with a folder": ({"name": "a/b", "save_dir": "{t}/out"}, NOT_PLAIN),
    "absolute name": ({"name": "/tmp/x", "save_dir": "{t}/out"}, NOT_PLAIN),
    "hidden name": ({"name": ".hidden"}, NOT_PLAIN),
    "empty name": ({"name": ""}, NOT_PLAIN),
    "name with a space": ({"name": "my run"}, NOT_PLAIN),
    "save_dir is a file": ({"save_dir": "{t}/a-file"}, "{t}/a-file: save_dir: exists and is not a folder"),
    "save_dir under a file": ({"save_dir": "{t}/a-file/runs"},
                              "{t}/a-file/runs: save_dir: cannot be created: {t}/a-file is not a folder"),
    "save_dir a dangling link": ({"save_dir": "{t}/dangling/runs"},
                                 "cannot be created: {t}/dangling is not a folder"),
}


@pytest.mark.parametrize("options, message", CALLBACK_REFUSED.values(), ids=CALLBACK_REFUSED.keys())
def test_callback_refuses_names_and_save_dirs_when_made(obstacle_dir, options, message):
    write_gold(GOLD, obstacle_dir / "gold.txt")
    before = sorted(obstacle_dir.rglob("*"))
    with pytest.raises(InputError) as info:
        hf.NBestEvalCallback(obstacle_dir / "gold.txt", **{k: v.format(t=obstacle_dir) for k, v in options.items()})
    assert message.format(t=obstacle_dir) in str(info.value)
    assert sorted(obstacle_dir.rglob("*")) == before


def test_callback_takes_a_save_dir_still_to_make(obstacle_dir):
    write_gold(GOLD, obstacle_dir / "gold.txt")
    callback = hf.NBestEvalCallback(obstacle_dir / "gold.txt", name="staple-v2.1",
                                    save_dir=obstacle_dir / "runs" / "nbest")
    assert callback.save_dir == obstacle_dir / "runs" / "nbest"
    assert not (obstacle_dir / "runs").exists()  # made when it saves
