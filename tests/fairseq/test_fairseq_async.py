"""--nbest-mode async end to end (issue 33): the sidecar's evaluator gives the values the loop logged,
and a tiny run in async mode (a child sidecar on the CPU) makes the loop's measures, verdict and kept
checkpoint. CPU only, one thread per process."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fairseq_runs import (
    ENV,
    STRICT_STOPPING,
    VALID_PROMPTS,
    as_logged,
    loop_stop,
    saved_record,
    train,
    train_command,
    valid_records,
)

fairseq = pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

import torch  # noqa: E402

torch.set_num_threads(1)  # the numerics of the training processes (OMP_NUM_THREADS=1)

from nbest_eval.fairseq.async_eval import FairseqSnapshotEvaluator  # noqa: E402
from nbest_eval.fairseq.checkpoints import read_checkpoint  # noqa: E402
from nbest_eval.fairseq.snapshot import snapshot_state, task_settings  # noqa: E402
from nbest_eval.training.handoff import Queue  # noqa: E402
from nbest_eval.training.handoff_files import Tags  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EPOCHS = 14  # the loop stops at 10 (kept: 9); async a validation or two later
STOPPING = STRICT_STOPPING


@pytest.fixture(scope="module")
def loop_run(fairseq_corpus):
    save = fairseq_corpus.root / "async-loop"
    result = train(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-save-dir", save / "nbest")
    result.save = save
    return result


@pytest.fixture(scope="module")
def async_run(fairseq_corpus):
    save = fairseq_corpus.root / "async-async"
    result = train(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
                   "--nbest-async-device", "cpu", "--nbest-save-dir", save / "nbest")
    result.save, result.queue = save, Queue(save)
    return result


def evaluator_of(path: Path) -> FairseqSnapshotEvaluator:
    return FairseqSnapshotEvaluator(task_settings(read_checkpoint(str(path))["cfg"]), save_dir="")


def test_the_evaluator_gives_the_values_the_loop_logged(loop_run, tmp_path):
    """Each epoch's checkpoint, and a weights-only snapshot of it, evaluate to the values the loop
    computed at that validation (its --nbest-save-dir record, full precision), exactly."""
    evaluator = evaluator_of(loop_run.save / "checkpoint1.pt")
    for record in loop_run.valid:
        epoch, updates = int(record["epoch"]), int(record["valid_num_updates"])
        path = loop_run.save / f"checkpoint{epoch}.pt"
        expected = {key: saved_record(loop_run, epoch, updates)[key] for key in evaluator.scorer.keys}
        evaluation = evaluator.evaluate(str(path), Tags(epoch, 0, updates, "u", epoch, ".pt"))
        assert as_logged(evaluation.values) == expected, epoch
        state = read_checkpoint(str(path))
        model = SimpleNamespace(state_dict=lambda state=state: state["model"])
        snapshot = tmp_path / f"snapshot{epoch}.pt"
        torch.save(snapshot_state(state["cfg"], model, SimpleNamespace(state_dict=dict), epoch, updates, {}), snapshot)
        again = evaluator.evaluate(str(snapshot), Tags(epoch, 0, updates, "u", epoch, ".pt"))
        assert again.values == evaluation.values and (again.per_prompt.matrix == evaluation.per_prompt.matrix).all()
    evaluator.close()


def test_async_makes_the_loops_measures_verdict_and_kept_checkpoint(loop_run, async_run):
    queue = async_run.queue
    results = queue.results()
    evaluated = {r["tags"]["update"]: r for r in results.values() if "values" in r}
    for record in loop_run.valid:  # every validation the loop made, evaluated with the loop's values
        epoch, updates = int(record["epoch"]), int(record["valid_num_updates"])
        expected = saved_record(loop_run, epoch, updates)
        assert updates in evaluated, (updates, sorted(evaluated))
        assert as_logged(evaluated[updates]["values"]) == {k: expected[k] for k in evaluated[updates]["values"]}
    assert sorted(evaluated) == [int(r["valid_num_updates"]) for r in loop_run.valid]  # none after the stop
    stop_update, kept_update = loop_stop(loop_run)
    verdict = queue.read_verdict()
    assert verdict["stop"] == (stop_update is not None)
    if stop_update is not None:
        assert results[verdict["stop_seq"]]["tags"]["update"] == stop_update
    assert verdict["kept"]["step"] == kept_update
    kept = queue.path(verdict["kept"]["path"])
    assert sorted(os.listdir(queue.path("kept"))) == [os.path.basename(kept)]
    assert not queue.waiting() and not os.listdir(queue.path("snapshots"))  # everything decided, the rest deleted
    ours, theirs = torch.load(kept, weights_only=False)["model"], \
        torch.load(loop_run.save / "checkpoint_best.pt", weights_only=False)["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    for listed in sorted((loop_run.save / "nbest").iterdir()):  # the lists saved, byte for byte, and their records
        theirs = async_run.save / "nbest" / listed.name
        if listed.suffix == ".json":
            expected = {k: v for k, v in json.loads(listed.read_text()).items() if k != "values_by_worker"}
            assert json.loads(theirs.read_text()) == expected, listed.name
        else:
            assert theirs.read_bytes() == listed.read_bytes(), listed.name
    best = async_run.save / "checkpoint_best.pt"
    assert best.is_symlink() and os.path.realpath(best) == os.path.realpath(kept)
    assert f"checkpoint_best.pt: update {kept_update}" in async_run.log
    if stop_update is not None:  # the stop verdict stops training once it arrives: within the queue's length
        assert "early stop since valid performance hasn't improved" in async_run.log
        assert len(loop_run.valid) <= len(async_run.valid) <= len(loop_run.valid) + 3
    assert "translation_nbest: sidecar: epoch 1, update" in async_run.log
    assert "; early stopping: " in async_run.log  # each arrival with the rule's explanation, as the loop logs it
    shown = [r for r in async_run.valid if "valid_nbest_of_update" in r]  # the latest arrived result's keys
    assert shown and all(int(float(r["valid_nbest_prompts"])) == VALID_PROMPTS and float(r["valid_nbest_gen_s"]) > 0
                         for r in shown)
    assert "watch: " in (queue.path("sidecar.log") and Path(queue.path("sidecar.log")).read_text())


def test_an_external_sidecar_started_first_decides_as_the_loop(fairseq_corpus, loop_run):
    """--nbest-async-device external: `nbest-eval watch SAVE_DIR` started by hand (before the trainer)."""
    save = fairseq_corpus.root / "async-external"
    watcher = subprocess.Popen([sys.executable, "-m", "nbest_eval", "watch", str(save), "--poll", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV, text=True)
    try:
        run = train(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
                    "--nbest-async-device", "external")
        out, _ = watcher.communicate(timeout=120)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0 and out.startswith("watch: waiting for a run to hand off to"), out
    verdict = Queue(save).read_verdict()
    assert verdict["kept"]["step"] == loop_stop(loop_run)[1]
    assert "a sidecar you start (nbest-eval watch)" in run.log and not (save / "nbest-async" / "sidecar.log").exists()


def test_a_killed_child_sidecar_is_reported_restarted_and_loses_nothing(fairseq_corpus, loop_run):
    """SIGKILL the child sidecar as soon as it has placed a result: the trainer says so at its next look
    (a validation, or the drain at the end), starts it again, and every validation is evaluated once."""
    save = fairseq_corpus.root / "async-killed"
    log = fairseq_corpus.root / "async-killed.log"
    with open(log, "w") as out:
        trainer = subprocess.Popen(train_command(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING,
                                                 "--nbest-mode", "async", "--nbest-async-device", "cpu"),
                                   stdout=out, stderr=subprocess.STDOUT, env=ENV)
        queue, killed, deadline = Queue(save), None, time.monotonic() + 120
        while killed is None and trainer.poll() is None and time.monotonic() < deadline:
            beats = list(Path(queue.path("sidecars")).glob("*.json")) if os.path.isdir(queue.path("sidecars")) else []
            if beats and queue.results():
                killed = json.loads(beats[0].read_text())["pid"]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        assert trainer.wait(timeout=300) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert killed is not None and "the sidecar ended (killed by signal 9)" in text, text[-3000:]
    assert "starting it again (1 of 3)" in text
    results = queue.results()
    evaluated = sorted(r["tags"]["update"] for r in results.values() if "values" in r)
    assert evaluated == [int(r["valid_num_updates"]) for r in loop_run.valid]  # each once, none lost
    assert queue.read_verdict()["kept"]["step"] == loop_stop(loop_run)[1]
    assert len(valid_records(text)) <= len(loop_run.valid) + 3
