"""--nbest-mode async, the trainer SIGKILLed mid-hand-off (NBEST_EVAL_FAULT) and resumed with fairseq's
own resume from checkpoint_last.pt (issue 33): the resumed run evaluates every validation once, with
the loop's values, and makes the loop's verdict and kept checkpoint. The oracle is a loop run of the
same configuration stopped and resumed at the same epoch. CPU only, one thread per process."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from fairseq_runs import ENV, STRICT_STOPPING, train, train_command

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

from nbest_eval.training.handoff import FAULT_ENV, Queue  # noqa: E402
from nbest_eval.training.heartbeat import pid_alive  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EPOCHS = 8
STOPPING = STRICT_STOPPING


@pytest.fixture(scope="module")
def faults_loop_run(fairseq_corpus):
    """The oracle: a loop run stopped after epoch 2 and resumed from its checkpoint_last.pt, as the
    killed async runs are (fairseq's resume does not train bit for bit as a run never stopped)."""
    save = fairseq_corpus.root / "faults-loop"
    args = (*STOPPING, "--nbest-save-dir", save / "nbest")
    first = train(fairseq_corpus, save, "--max-epoch", 2, *args, log_name="faults-loop-1.log")
    result = train(fairseq_corpus, save, "--max-epoch", EPOCHS, *args, log_name="faults-loop-2.log")
    result.valid, result.save = first.valid + result.valid, save
    return result


def async_args(save):
    return ("--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async", "--nbest-async-device", "cpu",
            "--nbest-save-dir", save / "nbest")


def wait_for_sidecars(queue, limit=120.0):
    """Until every sidecar that beat in the queue has ended (the killed trainer's drains the queue first)."""
    deadline = time.monotonic() + limit
    folder = Path(queue.path("sidecars"))
    while any(pid_alive(json.loads(p.read_text())["pid"]) for p in folder.glob("*.json")):
        assert time.monotonic() < deadline, "a sidecar did not end"
        time.sleep(0.2)


@pytest.mark.parametrize("point", ["placed", "staged"])
def test_a_trainer_killed_mid_hand_off_and_resumed_makes_the_loops_results(fairseq_corpus, faults_loop_run, point):
    """Killed as it hands off validation 3 (placed: before fairseq saves epoch 3; staged: before the
    snapshot is complete); the killed trainer's sidecar drains the queue (placed: it decides 3, keeping it)
    before the resume from epoch 2 validates 3 again."""
    save = fairseq_corpus.root / f"faults-{point}"
    queue = Queue(save)
    log = fairseq_corpus.root / f"faults-{point}-killed.log"
    with open(log, "w") as out:
        killed = subprocess.run(train_command(fairseq_corpus, save, *async_args(save)), stdout=out,
                                stderr=subprocess.STDOUT, env={**ENV, FAULT_ENV: f"{point}:3"}, timeout=600)
    assert killed.returncode == -9, log.read_text()[-3000:]
    wait_for_sidecars(queue)
    before = queue.results()
    assert sorted(before) == ([1, 2, 3] if point == "placed" else [1, 2])
    resumed = train(fairseq_corpus, save, *async_args(save), log_name=f"faults-{point}-resumed.log")
    wait_for_sidecars(queue)

    assert "resumed at update" in resumed.log and "generation 1" in resumed.log
    assert "early-stopping state not restored" not in resumed.log  # the rule's state is the queue's
    live = [json.loads(line) for line in Path(queue.path("results.jsonl")).read_text().splitlines()]
    evaluated = [r for r in live if "values" in r]
    loop_updates = [int(r["valid_num_updates"]) for r in faults_loop_run.valid]
    assert [r["tags"]["update"] for r in evaluated] == loop_updates  # each validation once, none lost
    for result in evaluated:  # the loop's values (its saved records, full precision), and its kept update
        update, epoch = result["tags"]["update"], result["tags"]["epoch"]
        record = json.loads((faults_loop_run.save / "nbest" / f"valid.epoch{epoch}.update{update}.json").read_text())
        assert {k: 0.0 if v is None else v for k, v in result["values"].items()} == \
            {k: record[k] for k in result["values"]}, update
    kept_updates = [loop_updates[r["decided"]["decision"]["kept"]] for r in evaluated]
    assert kept_updates == [int(r["valid_nbest_kept_update"]) for r in faults_loop_run.valid]
    verdict = queue.read_verdict()
    assert verdict["kept"]["step"] == int(faults_loop_run.valid[-1]["valid_nbest_kept_update"])
    if point == "placed":  # validation 3 was decided by the killed run's sidecar, then set aside
        assert queue.superseded() == {3} and 3 not in queue.results()
    ours = torch.load(queue.path(verdict["kept"]["path"]), weights_only=False)["model"]
    theirs = torch.load(faults_loop_run.save / "checkpoint_best.pt", weights_only=False)["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert not os.listdir(queue.path("snapshots"))  # no snapshot waiting, no staging folder left
    assert sorted(p.name for p in (save / "nbest").glob("*.tsv")) == \
        sorted(p.name for p in (faults_loop_run.save / "nbest").glob("*.tsv"))


def test_a_resume_that_restarts_fairseqs_update_count_is_refused(fairseq_corpus):
    """A checkpoint without optimizer state resumes at update 0: the queue's validations (by update)
    cannot be matched to the resumed run's, so async mode refuses, saying why and what to do."""
    save = fairseq_corpus.root / "faults-no-optimizer"
    args = ("--nbest-mode", "async", "--nbest-async-device", "cpu", "--no-save-optimizer-state")
    first = train(fairseq_corpus, save, "--max-epoch", 2, *args, log_name="faults-no-optimizer-1.log")
    assert "this run cannot be resumed in async mode" in first.log
    results = Queue(save).results()
    resumed = train(fairseq_corpus, save, "--max-epoch", 3, *args, log_name="faults-no-optimizer-2.log", check=False)
    assert resumed.returncode != 0
    assert "resumes at epoch 3 but at update 0" in resumed.log and "Resume from a checkpoint saved with" in resumed.log
    assert Queue(save).results() == results  # nothing set aside
