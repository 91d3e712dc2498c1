"""--nbest-mode async with two fairseq training workers (issue 33: "results are identical on 1 or N
workers"): two CPU processes started by hand (gloo) train in the loop and in async mode (a child
sidecar on the CPU) on the same corpus and seed; only rank 0 hands off, the other rank gets its
outcome, and the sidecar's values, lists, verdict and kept weights are the two-worker loop's.
CPU only, one thread per process."""

import os
import socket
import subprocess
import time
from types import SimpleNamespace

import pytest
from fairseq_runs import ENV, train_command, valid_records
from test_fairseq_async import STOPPING, as_logged, loop_stop, saved_record

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


def wait(proc, deadline: float):
    """``proc``'s exit code, or "still running" at ``deadline`` (time.monotonic)."""
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return "still running"


def two_workers(corpus, save, *extra):
    """fairseq-train on two CPU worker processes started by hand; their logs (rank 0's, rank 1's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs, logs = [], [corpus.root / f"{save.name}-rank{rank}.log" for rank in (0, 1)]
    for rank, log in enumerate(logs):
        cmd = train_command(corpus, save, *WORKERS, *extra, "--distributed-world-size", 2, "--distributed-rank", rank,
                            "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn",
                            "--device-id", 0, "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp")
        with open(log, "w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV))
    deadline = time.monotonic() + 120  # each run takes well under a minute
    try:
        codes = [wait(p, deadline) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    texts = [log.read_text() for log in logs]
    # training all-reduces at every update: a rank that stopped at another validation than the other
    # would leave its peer waiting on a closed connection (an error, or this wait's timeout)
    assert codes == [0, 0], f"exit codes {codes}:\n{texts[0][-3000:]}\n{texts[1][-3000:]}"
    return texts


@pytest.fixture(scope="module")
def loop_workers(fairseq_corpus):
    save = fairseq_corpus.root / "workers-loop"
    logs = two_workers(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-save-dir", save / "nbest")
    return save, logs


@pytest.fixture(scope="module")
def async_workers(fairseq_corpus):
    save = fairseq_corpus.root / "workers-async"
    logs = two_workers(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
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
