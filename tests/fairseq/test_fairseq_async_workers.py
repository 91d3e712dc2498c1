"""--nbest-mode async with two fairseq training workers (issue 33: "results are identical on 1 or N
workers"): two CPU processes started by hand (gloo) train in the loop and in async mode (a child
sidecar on the CPU) on the same corpus and seed; only rank 0 hands off, the other rank gets its
outcome, and the sidecar's values, lists, verdict and kept weights are the two-worker loop's.
CPU only, one thread per process."""

import os
from types import SimpleNamespace

import pytest
from fairseq_runs import STRICT_STOPPING as STOPPING
from fairseq_runs import as_logged, loop_stop, saved_record, two_workers, valid_records

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

from nbest_eval.training.handoff import Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EPOCHS = 14
#: 5 valid batches, so each worker generates and sums its share; half the args file's --max-tokens, so
#: an update of two workers sees as many tokens as one worker's and MAP rises within a few epochs
WORKERS = ("--batch-size-valid", 8, "--max-tokens", 500)
#: the loop sums each worker's batches and then the workers' sums, the sidecar all batches in one
#: process: the same float64 additions in another order, a few ulps apart at most
RELATIVE = 1e-9


@pytest.fixture(scope="module")
def loop_workers(fairseq_corpus):
    save = fairseq_corpus.root / "workers-loop"
    logs = two_workers(fairseq_corpus, save, *WORKERS, "--max-epoch", EPOCHS, *STOPPING,
                       "--nbest-save-dir", save / "nbest")
    return save, logs


@pytest.fixture(scope="module")
def async_workers(fairseq_corpus):
    save = fairseq_corpus.root / "workers-async"
    logs = two_workers(fairseq_corpus, save, *WORKERS, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
                       "--nbest-async-device", "cpu", "--nbest-save-dir", save / "nbest")
    return save, logs


def close(value, expected) -> bool:
    return value == expected or abs(value - expected) <= RELATIVE * max(abs(value), abs(expected))


def test_two_async_workers_make_the_two_worker_loops_results(loop_workers, async_workers):
    (loop_save, loop_logs), (save, logs) = loop_workers, async_workers
    loop = SimpleNamespace(save=loop_save, log=loop_logs[0], valid=valid_records(loop_logs[0]))
    assert loop.valid and "early stop since valid performance hasn't improved" in loop.log, loop.log[-3000:]
    queue = Queue(save)
    results = queue.results()
    evaluated = [r for r in results.values() if "values" in r]
    updates = [int(r["valid_num_updates"]) for r in loop.valid]
    assert sorted(r["tags"]["update"] for r in evaluated) == updates  # each of the loop's validations, once
    for result in evaluated:
        record = saved_record(loop, result["tags"]["epoch"], result["tags"]["update"])
        assert len(record["values_by_worker"]) == 2  # the loop's values are two workers' sums
        for key, value in as_logged(result["values"]).items():
            assert close(value, record[key]), (result["tags"], key, value, record[key])
    listed = sorted(p.name for p in (loop_save / "nbest").iterdir() if p.suffix == ".tsv")
    assert listed and listed == sorted(p.name for p in (save / "nbest").iterdir() if p.suffix == ".tsv")
    for name in listed:  # generated from the same batches: the same lists, byte for byte
        assert (save / "nbest" / name).read_bytes() == (loop_save / "nbest" / name).read_bytes(), name
    stop_update, kept_update = loop_stop(loop)
    assert kept_update < stop_update, loop.valid  # MAP rose, then fell: the rule keeps an earlier validation
    verdict = queue.read_verdict()
    assert verdict["stop"] and results[verdict["stop_seq"]]["tags"]["update"] == stop_update
    assert verdict["kept"]["step"] == kept_update
    best = save / "checkpoint_best.pt"
    assert best.is_symlink() and os.path.realpath(best) == os.path.realpath(queue.path(verdict["kept"]["path"]))
    ours = torch.load(best, weights_only=False)["model"]
    theirs = torch.load(loop_save / "checkpoint_best.pt", weights_only=False)["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert f"checkpoint_best.pt: update {kept_update}" in logs[0]
    assert "early stop since valid performance hasn't improved" in logs[0]
    assert "Traceback" not in logs[1], logs[1][-3000:]


def test_a_resume_at_update_0_is_refused_on_every_worker(fairseq_corpus):
    """Rank 0 checks the queue; every rank raises its refusal, so none waits for a peer that is gone."""
    save = fairseq_corpus.root / "workers-no-optimizer"
    args = (*WORKERS, "--nbest-mode", "async", "--nbest-async-device", "cpu", "--no-save-optimizer-state")
    two_workers(fairseq_corpus, save, "--max-epoch", 1, *args)
    logs = two_workers(fairseq_corpus, save, "--max-epoch", 2, *args, check=False)
    assert all("training resumes at epoch 2 but at update 0" in log for log in logs), logs[1][-3000:]
