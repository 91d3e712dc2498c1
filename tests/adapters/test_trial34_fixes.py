"""Issue 34's trial, adapters: the fairseq --nbest-save-dir removed mid-run gets its gold again."""

import logging
import shutil

import pytest

from nbest_eval.data import Gold, GoldPrompt
from nbest_eval.formats import read_gold

GOLD = Gold([GoldPrompt("p1", "a cat", (("um gato", 0.75), ("uma gata", 0.25)))])


def test_fairseq_save_dir_removed_mid_run_gets_its_gold_again(tmp_path, caplog):
    """The lists saved after the folder was removed must stay re-scorable: the gold is written again,
    with one warning; while it is there nothing is written or said."""
    pytest.importorskip("fairseq")
    from nbest_eval.fairseq import save_dir

    folder = tmp_path / "nbest"
    save_dir.prepare(str(folder), "valid", GOLD, write=True)
    shutil.rmtree(folder)
    with caplog.at_level(logging.WARNING):
        save_dir.rewrite_gold(str(folder), "valid", GOLD)
        save_dir.rewrite_gold(str(folder), "valid", GOLD)
    again = read_gold(str(folder / "valid.gold.txt"))
    assert [(p.id, p.text, p.translations) for p in again] == [("p1", "a cat", (("um gato", 0.75), ("uma gata", 0.25)))]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "valid.gold.txt was gone" in warned[0], warned
