"""`nbest-eval watch` under torchrun (issue 33): two sidecar processes (gloo, CPU) validate each snapshot
as two fairseq workers validate in the loop, each its shard of the batches, the totals summed over the
ranks at each batch as fairseq's trainer sums them. A two-worker run hands off to them (--nbest-async-device
external); its values are the two-worker loop's exactly, and its lists, verdict and kept weights too.
CPU only, one thread per process."""

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from fairseq_runs import ENV, as_logged, loop_stop, saved_record, two_workers, valid_records
from fairseq_runs import STRICT_STOPPING as STOPPING
from test_fairseq_async_workers import EPOCHS, WORKERS

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

from nbest_eval.training.handoff import Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`


def torchrun_watch(save, log, *extra):
    """``nbest-eval watch`` on two processes started by torchrun (its own process group, so a failed
    test can end it and its workers at once)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "nbest_eval", "watch", str(save), "--poll", "0.2", *extra]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)


def ended(proc: subprocess.Popen, timeout: float):
    """``proc``'s exit code, or "still running" after ``timeout`` s (then it and its children are killed)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "still running"


@pytest.fixture(scope="module")
def sharded_loop(fairseq_corpus):
    save = fairseq_corpus.root / "sharded-loop"
    logs = two_workers(fairseq_corpus, save, *WORKERS, "--max-epoch", EPOCHS, *STOPPING,
                       "--nbest-save-dir", save / "nbest")
    return SimpleNamespace(save=save, log=logs[0], valid=valid_records(logs[0]))


@pytest.fixture(scope="module")
def sharded_sidecar(fairseq_corpus):
    """A two-worker async run and, beside it from the start, a two-process watch (until the trainer is done)."""
    save = fairseq_corpus.root / "sharded-async"
    log = fairseq_corpus.root / "sharded-watch.log"
    watch = torchrun_watch(save, log)
    try:
        logs = two_workers(fairseq_corpus, save, *WORKERS, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
                           "--nbest-async-device", "external", "--nbest-save-dir", save / "nbest", timeout=600)
    finally:
        code = ended(watch, 120)
    return SimpleNamespace(save=save, logs=logs, code=code, watch=log.read_text())


def test_a_two_process_watch_makes_the_two_worker_loops_results(sharded_loop, sharded_sidecar):
    loop, run = sharded_loop, sharded_sidecar
    assert run.code == 0, run.watch[-3000:]
    assert loop.valid and "early stop since valid performance hasn't improved" in loop.log, loop.log[-3000:]
    queue = Queue(run.save)
    results = queue.results()
    evaluated = [r for r in results.values() if "values" in r]
    updates = [int(r["valid_num_updates"]) for r in loop.valid]
    assert sorted(r["tags"]["update"] for r in evaluated) == updates  # each of the loop's validations, once
    assert not queue.waiting() and sorted(results) == list(range(1, len(results) + 1))  # every hand-off, once
    assert len({(r["sidecar"]["host"], r["sidecar"]["pid"]) for r in evaluated}) == 1  # rank 0 alone places
    assert f"watch: {len(evaluated)} evaluated" in run.watch, run.watch[-3000:]
    assert f"watch: rank 1 validated its shard of {len(evaluated)} snapshots" in run.watch, run.watch[-3000:]
    for result in evaluated:  # summed as the loop sums them: equal, not close
        record = saved_record(loop, result["tags"]["epoch"], result["tags"]["update"])
        assert len(record["values_by_worker"]) == 2
        assert as_logged(result["values"]) == {key: record[key] for key in result["values"]}, result["tags"]
    listed = sorted(p.name for p in (loop.save / "nbest").iterdir() if p.suffix == ".tsv")
    assert listed and listed == sorted(p.name for p in (run.save / "nbest").iterdir() if p.suffix == ".tsv")
    for name in listed:  # both ranks' lists, gathered on rank 0: the loop's, byte for byte
        assert (run.save / "nbest" / name).read_bytes() == (loop.save / "nbest" / name).read_bytes(), name
    stop_update, kept_update = loop_stop(loop)
    assert kept_update < stop_update, loop.valid  # MAP rose, then fell: the rule keeps an earlier validation
    verdict = queue.read_verdict()
    assert verdict["stop"] and results[verdict["stop_seq"]]["tags"]["update"] == stop_update
    assert verdict["kept"]["step"] == kept_update
    ours = torch.load(run.save / "checkpoint_best.pt", weights_only=False)["model"]
    theirs = torch.load(loop.save / "checkpoint_best.pt", weights_only=False)["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert "early stop since valid performance hasn't improved" in run.logs[0]
    assert "Traceback" not in run.watch and "Traceback" not in run.logs[1], run.watch[-3000:]
