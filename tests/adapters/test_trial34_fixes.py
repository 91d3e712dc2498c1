"""Issue 34's trial, adapters: the fairseq --nbest-save-dir removed mid-run gets its gold again."""

import logging
import shutil
import signal

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


# -- the scoring helper killed while idle -------------------------------------------------------------------

@pytest.mark.parametrize("sig, how", [(signal.SIGKILL, "signal 9 (SIGKILL) (it wrote nothing: e.g. the out-of-memory"),
                                      (signal.SIGTERM, "signal 15 (SIGTERM) (it wrote nothing)")])
def test_a_helper_killed_while_idle_is_restarted_with_one_warning(caplog, sig, how):
    """The adapters' running(): a helper that ended since the last validation is replaced, and said
    once with how it ended; only SIGKILL suggests the out-of-memory killer."""
    from nbest_eval import Scorer
    from nbest_eval.processes import pipeline

    scorer = Scorer(["map"])
    first = pipeline.ScoringProcess(scorer, GOLD.prompts)
    try:
        assert pipeline.running(first, scorer, GOLD.prompts) is first
        first.process.send_signal(sig)
        first.process.wait()
        with caplog.at_level(logging.WARNING, logger="nbest_eval.processes.pipeline"):
            second = pipeline.running(first, scorer, GOLD.prompts)
            assert second is not first and second.alive
            assert pipeline.running(second, scorer, GOLD.prompts) is second
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and how in warned[0] and warned[0].endswith("; a new one is started"), warned
        if sig != signal.SIGKILL:
            assert "out-of-memory" not in warned[0]
        second.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="nbest_eval.processes.pipeline"):
            pipeline.running(second, scorer, GOLD.prompts).close()  # closed on purpose: nothing to say
        assert not caplog.records
    finally:
        first.close()
