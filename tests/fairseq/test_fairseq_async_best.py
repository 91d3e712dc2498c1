"""--nbest-mode async without an early-stopping rule (issue 33): the sidecar keeps the best
--best-checkpoint-metric so far (fairseq cannot see it in this mode), so checkpoint_best.pt has the
weights the loop's fairseq keeps, and the queue holds that one snapshot only. CPU only."""

import os

import pytest
from fairseq_runs import train

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

from nbest_eval.training.handoff import Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EPOCHS = 6


def test_without_a_rule_checkpoint_best_is_the_loops(fairseq_corpus):
    loop = fairseq_corpus.root / "best-loop"
    asynchronous = fairseq_corpus.root / "best-async"
    train(fairseq_corpus, loop, "--max-epoch", EPOCHS)
    run = train(fairseq_corpus, asynchronous, "--max-epoch", EPOCHS, "--nbest-mode", "async",
                "--nbest-async-device", "cpu")
    queue = Queue(asynchronous)
    verdict = queue.read_verdict()
    assert verdict["validations"] == EPOCHS and not verdict["stop"]
    assert [entry.seq for entry in queue.entries("kept")] == [verdict["kept"]["seq"]]
    assert queue.entries("snapshots") == []  # the others, evaluated, were deleted

    best = asynchronous / "checkpoint_best.pt"
    assert best.is_symlink() and os.path.realpath(best) == os.path.realpath(queue.path(verdict["kept"]["path"]))
    ours = torch.load(best, weights_only=False)["model"]
    theirs = torch.load(loop / "checkpoint_best.pt", weights_only=False)["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert f"checkpoint_best.pt: update {verdict['kept']['step']}" in run.log and "best map so far" in run.log
