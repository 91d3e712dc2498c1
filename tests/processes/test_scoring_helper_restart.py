"""The adapters' scoring helper (nbest_eval.processes.pipeline.running): one that ended since the
last validation is replaced, and said once with how it ended; one closed on purpose is not said."""

import logging
import signal

import pytest

from nbest_eval import Scorer
from nbest_eval.data import Gold, GoldPrompt
from nbest_eval.processes import pipeline

GOLD = Gold([GoldPrompt("p1", "a cat", (("um gato", 0.75), ("uma gata", 0.25)))])

@pytest.mark.parametrize("sig, how", [(signal.SIGKILL, "signal 9 (SIGKILL) (it wrote nothing: e.g. the out-of-memory"),
                                      (signal.SIGTERM, "signal 15 (SIGTERM) (it wrote nothing)")])
def test_a_helper_killed_while_idle_is_restarted_with_one_warning(caplog, sig, how):
    """Only SIGKILL suggests the out-of-memory killer."""
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
