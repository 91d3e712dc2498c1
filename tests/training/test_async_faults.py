"""Faults around the hand-off queue (issue 33), framework-free, with n-best files as snapshots: a
sidecar SIGKILLed at each named point of its work (NBEST_EVAL_FAULT) and started again decides as a
run without faults; a trainer killed mid-hand-off leaves nothing listed, and its successor removes the
staging; a resumed trainer rewinds the queue to the step it resumes from (the superseded validations
are set aside, the verdict rolled back to the oracle's state after the last validation it keeps, the
kept snapshot still there because the sidecar held it); an external sidecar that stops beating is
reported. The oracle is the decision core run directly on the same files."""

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
from cases import quality_lists

from nbest_eval.formats import read_nbest
from nbest_eval.scorer import Scorer
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import EarlyStopping, State
from nbest_eval.training.handoff import FAULT_ENV, Queue, Tags
from nbest_eval.training.handoff_files import read_json
from nbest_eval.training.heartbeat import Heartbeat
from nbest_eval.training.sidecar import ListsEvaluator, decide_pending, watch
from nbest_eval.training.trainer_side import TrainerSide, new_manifest

REPO = Path(__file__).resolve().parents[2]
KEYS = ["map"]
#: each checkpoint's share of prompts whose valid translations come first: better to 3, then worse
QUALITY = [0.1, 0.4, 0.8, 0.3, 0.2, 0.1]
RULE = EarlyStopping("map", "strict", patience=3)


@pytest.fixture
def fault_lists(tmp_path):
    """Six checkpoints' n-best files (tsv) on a 30-prompt gold, of the quality QUALITY says."""
    return quality_lists(tmp_path, QUALITY)


def enqueue(queue, paths, first=1, gen=0):
    """Hand each file off as the snapshot of epoch first+i, update 100 * (first+i)."""
    for i, path in enumerate(paths, first):
        queue.put(lambda partial, path=path: shutil.copy(path, partial), Tags(None, gen, 100 * i, "u", i))


def oracle(gold, paths):
    """The decision core run directly on each file, as a run without faults decides: states and decisions."""
    scorer, state, states, decisions = Scorer(KEYS), State(), [], []
    for i, path in enumerate(paths):
        stats = PerPrompt(scorer, scorer.score(gold, read_nbest(path, gold), keep_per_prompt=True).per_prompt)
        state, decision = RULE.decide(state, stats=stats, step=100 * (i + 1), gold=gold.digest())
        states.append(state)
        decisions.append(decision)
        if decision.stop:
            break
    return states, decisions


def drain(queue, gold):
    return watch(queue, ListsEvaluator(gold, Scorer(KEYS)), RULE, until="drained", poll=0.01)


def staging(queue):
    return [os.path.join(root, name) for root, dirs, files in os.walk(queue.root)
            for name in dirs + files if name.endswith(".partial")]


def live_results(queue):
    """results.jsonl: the validations that count, each with its decision, in order."""
    return [json.loads(line) for line in Path(queue.path("results.jsonl")).read_text().splitlines()]


def with_manifest(queue, gold_path):
    queue.write_manifest(new_manifest("lists", str(gold_path), "digest", {}, RULE, 2, False))


def test_the_fixture_moves_the_kept_validation_up_to_3_then_stops(fault_lists):
    """What the tests below need: the kept validation is 1, 2, 3 after 1, 2, 3, and the rule stops at 6."""
    states, decisions = oracle(*fault_lists)
    assert [s.kept for s in states[:3]] == [0, 1, 2] and decisions[-1].stop and len(decisions) == 6


SIDECAR = """
import sys
from nbest_eval.formats import read_gold
from nbest_eval.scorer import Scorer
from nbest_eval.training.early_stopping import EarlyStopping
from nbest_eval.training.handoff import Queue
from nbest_eval.training.sidecar import ListsEvaluator, watch

watch(Queue(sys.argv[1]), ListsEvaluator(read_gold(sys.argv[2]), Scorer(["map"])),
      EarlyStopping("map", "strict", 3), until="drained", poll=0.01)
"""


@pytest.mark.parametrize("point", ["claimed", "result-placed", "kept-moved", "decision-written", "verdict-written"])
def test_a_sidecar_killed_at_any_point_and_started_again_decides_as_without_faults(tmp_path, fault_lists, point):
    gold, paths = fault_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths)
    env = {**os.environ, "PYTHONPATH": str(REPO), FAULT_ENV: f"{point}:3"}
    killed = subprocess.run([sys.executable, "-c", SIDECAR, queue.root, str(tmp_path / "gold.txt")], env=env,
                            timeout=120)
    assert killed.returncode == -9  # it died at the point, snapshot 3 (kept when decided)
    drain(queue, gold)
    states, decisions = oracle(gold, paths)
    results = queue.results()
    assert sorted(results) == [1, 2, 3, 4, 5, 6] and all("values" in r for r in results.values())
    assert [read_json(queue.path("decisions", f"{s:06d}.json"), "d")["decision"] for s in results] == \
        [asdict(d) for d in decisions]
    verdict = queue.read_verdict()
    assert verdict["state"] == states[-1].to_dict() and verdict["stop"]
    assert [e.seq for e in queue.entries("kept")] == [3] and queue.entries() == [] and staging(queue) == []


def test_a_trainer_killed_while_staging_leaves_nothing_listed_and_its_successor_clears_it(tmp_path, fault_lists):
    gold, paths = fault_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:1])
    put = """
import shutil, sys
from nbest_eval.training.handoff import Queue, Tags
Queue(sys.argv[1]).put(lambda partial: shutil.copy(sys.argv[2], partial), Tags(None, 0, 200, "u", 2))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), FAULT_ENV: "staged:2"}
    assert subprocess.run([sys.executable, "-c", put, queue.root, paths[1]], env=env).returncode == -9
    assert len(staging(queue)) == 1 and [e.seq for e in queue.entries()] == [1]  # half a hand-off, never listed
    with_manifest(queue, tmp_path / "gold.txt")
    side = TrainerSide(str(tmp_path / "run"), "external", 2, False, 10.0, "test")
    side.start({}, lambda: None, resumed_at=100)
    try:
        assert staging(queue) == [] and [e.seq for e in queue.entries()] == [1]
    finally:
        side.conclude(failed=True)


def run_until(queue, gold, paths, saved_through):
    """A trainer that handed off ``paths`` (steps 100, 200, ...) and saved its checkpoint at ``saved_through``
    (None: no heartbeat), its sidecar having decided them all."""
    with_manifest(queue, "gold.txt")
    if saved_through is not None:
        Heartbeat.of_trainer(queue, saved_through=saved_through).beat()
    enqueue(queue, paths)
    drain(queue, gold)


def resume(tmp_path, resumed_at):
    side = TrainerSide(str(tmp_path / "run"), "external", 5, False, 10.0, "test")
    side.start({}, lambda: None, resumed_at=resumed_at)
    return side


def test_a_resumed_trainer_rewinds_the_queue_and_the_run_decides_as_without_faults(tmp_path, fault_lists, caplog):
    """Killed after handing off update 600 with its checkpoint at 200: the sidecar decided 1-6 (keeping
    3, then stopping); the resume from 200 sets 3-6 aside, rolls the verdict back to after 2 (kept: 2,
    which the sidecar held since a resume could need it) and the retrained 3-6 (seqs 7-10, generation 1)
    make the fault-free verdict."""
    gold, paths = fault_lists
    queue = Queue(tmp_path / "run")
    run_until(queue, gold, paths, saved_through=200)
    assert queue.read_verdict()["kept"]["seq"] == 3
    assert sorted(e.seq for e in queue.entries("kept")) == [2, 3]  # 2 held: the checkpoint is older than 3
    states, decisions = oracle(gold, paths)

    with caplog.at_level(logging.INFO):
        side = resume(tmp_path, 200)
    try:
        verdict = queue.read_verdict()
        assert verdict["state"] == states[1].to_dict() and verdict["kept"]["seq"] == 2 and not verdict["stop"]
        assert verdict["kept"]["path"] == os.path.join("kept", "000002-g0-u200-e2")
        assert sorted(queue.results()) == [1, 2] and queue.superseded() == {3, 4, 5, 6}
        assert sorted(os.listdir(queue.path("results", "superseded-g1"))) == [f"00000{s}.json" for s in (3, 4, 5, 6)]
        assert [e.seq for e in queue.entries("kept")] == [2] and queue.entries() == []
        assert read_json(queue.path("trainer.json"), "t")["gen"] == 1
        assert "resumed at update 200: generation 1" in caplog.text

        for i, path in enumerate(paths[2:], 3):  # the retrained validations
            side.hand_off(lambda partial, info, path=path: shutil.copy(path, partial), Tags(None, 0, 100 * i, "u", i))
        names = [f"{s:06d}-g1-u{100 * (s - 4)}-e{s - 4}" for s in (7, 8, 9, 10)]
        assert [e.tags.name for e in queue.entries()] == names
        drain(queue, gold)
    finally:
        side.conclude(failed=True)
    verdict = queue.read_verdict()
    assert verdict["state"] == states[-1].to_dict() and verdict["stop"] and verdict["decided"] == [1, 2, 7, 8, 9, 10]
    live = live_results(queue)  # one per validation of the resumed run, none twice
    assert [(r["seq"], r["tags"]["update"]) for r in live] == [(1, 100), (2, 200), (7, 300), (8, 400), (9, 500),
                                                               (10, 600)]
    assert [r["decided"]["decision"] for r in live] == [asdict(d) for d in decisions]
    assert [e.seq for e in queue.entries("kept")] == [7]


def test_a_kept_snapshot_deleted_before_an_older_resume_is_reported_gone(tmp_path, fault_lists, caplog):
    """No trainer heartbeat said what the checkpoint covers, so 2 was deleted when 3 was kept: a resume
    from 200 rolls the verdict back to keeping 2, says its weights are gone and names no path."""
    gold, paths = fault_lists
    queue = Queue(tmp_path / "run")
    run_until(queue, gold, paths[:3], saved_through=None)
    assert [e.seq for e in queue.entries("kept")] == [3]
    with caplog.at_level(logging.ERROR):
        side = resume(tmp_path, 200)
    side.conclude(failed=True)
    verdict = queue.read_verdict()
    assert verdict["kept"]["seq"] == 2 and verdict["kept"]["path"] is None
    assert "(seq 2) was deleted before this resume" in caplog.text and "its weights are gone" in caplog.text


def test_held_snapshots_go_once_the_checkpoint_covers_them(tmp_path, fault_lists):
    gold, paths = fault_lists
    queue = Queue(tmp_path / "run")
    run_until(queue, gold, paths[:3], saved_through=100)
    assert sorted(e.seq for e in queue.entries("kept")) == [1, 2, 3]
    Heartbeat.of_trainer(queue, saved_through=300).beat()
    decide_pending(queue, RULE, Scorer(KEYS), gold)
    assert [e.seq for e in queue.entries("kept")] == [3] and queue.read_verdict()["keep"] == [3]


def test_the_trainer_records_the_step_its_checkpoint_covers(tmp_path):
    """saved_through: the last hand-off made before the checkpoint file was last written."""
    written = []
    side = TrainerSide(str(tmp_path / "run"), "external", 5, False, 10.0, "test")
    side.start({"format": 1, "framework": "lists", "run_id": "r", "queue": 5, "skip": False, "stopping": None},
               lambda: None, resumed_at=0, saved_at=lambda: written[-1] if written else None)
    try:
        for step in (100, 200, 300):
            side.hand_off(lambda partial, info: Path(partial).write_text("x"), Tags(None, 0, step, "u"))
            if step == 200:
                time.sleep(0.02)
                written.append(time.time())  # saved after handing 200 off (before 300)
        side.hand_off(lambda partial, info: Path(partial).write_text("x"), Tags(None, 0, 400, "u"))
        assert read_json(side.queue.path("trainer.json"), "t")["saved_through"] == 200
    finally:
        side.conclude(failed=True)


def test_an_external_sidecar_that_stops_beating_is_reported_at_each_validation(tmp_path, caplog):
    now = [0.0]
    side = TrainerSide(str(tmp_path / "run"), "external", 5, False, 10.0, "test", clock=lambda: now[0])
    queue = side.queue
    queue.create()
    assert not side.check_sidecars() and "no live sidecar" not in caplog.text  # none yet: a minute's grace
    now[0] = 60.0
    assert not side.check_sidecars() and "no live sidecar: 0 snapshot(s) waiting" in caplog.text
    now[0] = 0.0
    far = Heartbeat.of_sidecar(queue, "elsewhere.7")
    far.record.update(host="elsewhere", boot_id="")
    far.beat()
    caplog.clear()
    assert side.check_sidecars() and "no live sidecar" not in caplog.text
    now[0] = 61.0  # a minute of the trainer's clock without a beat
    assert not side.check_sidecars() and "no live sidecar" in caplog.text
    far.beat()
    assert side.check_sidecars()
    far.beat(state="done")
    assert not side.check_sidecars()
