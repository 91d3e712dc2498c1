"""The fairseq task's --nbest-save-dir, without training: made with its parents when the run is set up,
refused on every rank (naming the option and the path, writing nothing) where it cannot be made, and
given its gold again when it is removed mid-run, so that the lists saved after stay re-scorable."""

import logging
import os
import shutil
from types import SimpleNamespace

import pytest

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

from fairseq.distributed import utils as distributed_utils  # noqa: E402

from nbest_eval.data import Gold, GoldPrompt  # noqa: E402
from nbest_eval.fairseq import save_dir  # noqa: E402
from nbest_eval.fairseq.task import NBestConfigError, TranslationNBestTask  # noqa: E402
from nbest_eval.formats import read_gold  # noqa: E402

GOLD = Gold([GoldPrompt("p1", "a cat", (("um gato", 0.75), ("uma gata", 0.25))),
             GoldPrompt("p2", "bye", (("tchau", 1.0),))])
#: GOLD as written by hand: what a gold file read back must hold
GOLD_ROWS = [("p1", "a cat", (("um gato", 0.75), ("uma gata", 0.25))), ("p2", "bye", (("tchau", 1.0),))]


def rows(path):
    return [(p.id, p.text, p.translations) for p in read_gold(str(path))]


def prepared(folder):
    """The task's save-dir set-up as load_dataset runs it, on a task with just what it reads."""
    task = TranslationNBestTask.__new__(TranslationNBestTask)
    task.cfg, task.nbest_subset = SimpleNamespace(nbest_save_dir=str(folder)), "valid"
    task.plan = SimpleNamespace(gold=GOLD)
    task._prepare_save_dir()


SAVE_DIR_REFUSED = {  # --nbest-save-dir ({t}: the folder) -> what the error says
    "a file": ("{t}/a-file", "{t}/a-file: --nbest-save-dir: exists and is not a folder"),
    "under a file": ("{t}/a-file/nbest", "--nbest-save-dir: cannot be created: {t}/a-file is not a folder"),
    "a dangling link": ("{t}/dangling", "{t}/dangling: --nbest-save-dir: exists and is not a folder"),
}


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("folder, message", SAVE_DIR_REFUSED.values(), ids=SAVE_DIR_REFUSED.keys())
def test_a_save_dir_that_cannot_be_made_stops_every_rank(obstacle_dir, monkeypatch, folder, message, rank):
    monkeypatch.setattr(distributed_utils, "get_global_rank", lambda: rank)
    before = sorted(obstacle_dir.rglob("*"))
    with pytest.raises(NBestConfigError) as info:
        prepared(folder.format(t=obstacle_dir))
    assert str(info.value).startswith("translation_nbest: ") and message.format(t=obstacle_dir) in str(info.value)
    assert sorted(obstacle_dir.rglob("*")) == before


def test_a_save_dir_is_made_with_its_parents(obstacle_dir):
    prepared(obstacle_dir / "runs" / "nbest")
    assert os.listdir(obstacle_dir / "runs" / "nbest") == ["valid.gold.txt"]
    assert rows(obstacle_dir / "runs" / "nbest" / "valid.gold.txt") == GOLD_ROWS


def test_a_save_dir_removed_mid_run_gets_its_gold_again(tmp_path, caplog):
    """The gold is written again, with one warning; while it is there nothing is written or said."""
    folder = tmp_path / "nbest"
    save_dir.prepare(str(folder), "valid", GOLD, write=True)
    shutil.rmtree(folder)
    with caplog.at_level(logging.WARNING):
        save_dir.rewrite_gold(str(folder), "valid", GOLD)
        save_dir.rewrite_gold(str(folder), "valid", GOLD)
    assert rows(folder / "valid.gold.txt") == GOLD_ROWS
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "valid.gold.txt was gone" in warned[0], warned

