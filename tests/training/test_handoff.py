"""The hand-off queue (training.handoff, issue 33): names, atomic hand-off, claims by kernel locks
(exclusive across processes, freed by SIGKILL), write-once results, the bounded queue (wait, skip),
reconcile after a cut-short decision, heartbeats, and every file read back as hostile input."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nbest_eval import InputError
from nbest_eval.training.handoff import SKIPPED, Queue, Tags
from nbest_eval.training.heartbeat import Heartbeat, Liveness, read_heartbeat, trainer_status

REPO = Path(__file__).resolve().parents[2]
MANIFEST = {"format": 1, "framework": "lists", "run_id": "r1", "queue": 2, "skip": False, "stopping": None}


def text(body):
    """A render that writes ``body`` to the partial path."""
    return lambda partial: Path(partial).write_text(body)


def put(queue, step, body="x", epoch=None):
    return queue.put(text(body), Tags(None, 0, step, "u", epoch))


@pytest.mark.parametrize("name, tags", [
    ("000007-g0-u1200-e3.pt", Tags(7, 0, 1200, "u", 3, ".pt")),
    ("000012-g2-s500", Tags(12, 2, 500, "s")),
    ("000001-g0-u5-e1", Tags(1, 0, 5, "u", 1)),
])
def test_a_name_holds_its_tags(name, tags):
    assert Tags.parse(name) == tags and tags.name == name


@pytest.mark.parametrize("name", [".000001-g0-u5.abc.partial", "000001-g0-u5.tmp", "1-g0-u5", "000001-g0-x5",
                                  "0000001-g0-u5", "000001-g0-u5-e", "checkpoint_1_5.pt", "000001-g0-u5.pt.pt"])
def test_other_names_are_not_snapshots(tmp_path, name):
    queue = Queue(tmp_path)
    queue.create()
    (Path(queue.path("snapshots")) / name).write_text("x")
    assert Tags.parse(name) is None and queue.entries() == [] and queue.waiting() == []


def test_the_queue_is_the_run_dir_s_nbest_async_or_that_folder_itself(tmp_path):
    assert Queue(tmp_path).root == str(tmp_path / "nbest-async") == Queue(tmp_path / "nbest-async").root


def test_put_numbers_snapshots_in_order_after_everything_already_there(tmp_path):
    queue = Queue(tmp_path)
    assert [put(queue, step).seq for step in (10, 20)] == [1, 2]
    queue.put_result(2, {"tags": {}, "skipped": SKIPPED})
    os.unlink(queue.path("snapshots", "000002-g0-u20"))  # deleted after its result: its number is still used
    assert put(queue, 30).seq == 3
    assert [e.tags.name for e in queue.entries()] == ["000001-g0-u10", "000003-g0-u30"]


def test_a_snapshot_being_written_is_never_listed(tmp_path):
    """put renders under a private name and renames the whole file or folder into place."""
    queue = Queue(tmp_path)
    seen = []

    def render(partial):
        os.mkdir(partial)
        Path(partial, "model.safetensors").write_text("half")
        seen.append((queue.entries(), queue.waiting(), queue.claim_next()))
        Path(partial, "config.json").write_text("{}")

    entry = queue.put(render, Tags(None, 0, 5, "s"))
    assert seen == [([], [], None)]
    assert sorted(os.listdir(entry.path)) == ["config.json", "model.safetensors"]
    assert os.listdir(queue.path("snapshots")) == [entry.tags.name]  # no staging folder left


def test_a_failed_or_killed_hand_off_leaves_nothing_listed(tmp_path):
    queue = Queue(tmp_path)

    def fail(partial):
        Path(partial).write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        queue.put(fail, Tags(None, 0, 5))
    assert os.listdir(queue.path("snapshots")) == []
    code = ("import os, signal, sys; from pathlib import Path; from nbest_eval.training.handoff import Queue, Tags\n"
            "def render(partial):\n    Path(partial).write_text('half')\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            f"Queue({str(tmp_path)!r}).put(render, Tags(None, 0, 5))\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -signal.SIGKILL
    assert len(os.listdir(queue.path("snapshots"))) == 1  # the staging folder, which no reader lists
    assert queue.entries() == [] and queue.waiting() == [] and queue.next_seq() == 1


def test_a_result_is_written_once(tmp_path):
    queue = Queue(tmp_path)
    entry = put(queue, 10)
    queue.put_result(1, {"tags": entry.tags.as_dict(), "values": {"map": 0.5}, "per_prompt": {}})
    with pytest.raises(InputError, match="already exists"):
        queue.put_result(1, {"tags": entry.tags.as_dict(), "values": {"map": 0.9}, "per_prompt": {}})
    assert queue.result(1)["values"] == {"map": 0.5} and queue.waiting() == []


def test_results_come_in_sequence_order(tmp_path):
    queue = Queue(tmp_path)
    for seq in (3, 1, 2):
        queue.put_result(seq, {"tags": {}, "skipped": SKIPPED})
    assert list(queue.results()) == [1, 2, 3]


def test_a_claim_excludes_every_other_claimant_until_released(tmp_path):
    queue = Queue(tmp_path)
    put(queue, 10), put(queue, 20)
    first = queue.claim_next()
    second = queue.claim_next()  # the next snapshot: the first is held (flock, per open file)
    assert (first.entry.seq, second.entry.seq) == (1, 2) and queue.claim_next() is None
    first.release()
    again = queue.claim_next()
    assert again.entry.seq == 1  # released without a result: claimable again
    queue.put_result(1, {"tags": {}, "skipped": SKIPPED})
    again.release()
    assert not os.path.exists(queue.path("claims", "000001.lock"))  # removed once it has a result
    assert queue.claim_next() is None  # 1 has a result, 2 is held
    second.release()


def test_a_claim_is_checked_again_after_locking(tmp_path):
    """The holder may finish and release between another sidecar's listing and its lock."""
    queue = Queue(tmp_path)
    entry = put(queue, 10)
    queue.put_result(1, {"tags": {}, "skipped": SKIPPED})  # finished meanwhile
    assert queue.try_claim(entry, {}) is None


CLAIM_AND_SLEEP = ("import sys, time; from nbest_eval.training.handoff import Queue\n"
                   "claim = Queue(sys.argv[1]).claim_next()\n"
                   "print(claim.entry.seq, flush=True)\n"
                   "time.sleep(60)\n")


def test_a_claim_held_by_another_process_is_exclusive_and_freed_by_sigkill(tmp_path):
    queue = Queue(tmp_path)
    put(queue, 10)
    holder = subprocess.Popen([sys.executable, "-c", CLAIM_AND_SLEEP, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "1"
        assert queue.claim_next() is None
        assert not queue.skip(queue.entries()[0])  # the trainer cannot skip it either
    finally:
        holder.kill()
        holder.wait()
    claim = queue.claim_next()  # no stale claim: the kernel dropped the lock
    assert claim.entry.seq == 1 and not queue.has_result(1)
    claim.release()


def test_make_room_waits_until_a_snapshot_is_evaluated(tmp_path):
    queue = Queue(tmp_path)
    put(queue, 10), put(queue, 20)
    assert queue.make_room(3, poll=0.01)
    assert not queue.make_room(2, poll=0.01, timeout=0.05)  # nobody evaluates: a timeout
    timer = threading.Timer(0.05, lambda: queue.put_result(1, {"tags": {}, "values": {}, "per_prompt": {}}))
    timer.start()
    assert queue.make_room(2, poll=0.01, timeout=10)
    timer.join()
    assert [e.seq for e in queue.waiting()] == [2]


def test_make_room_with_skip_skips_every_unclaimed_waiting_snapshot(tmp_path):
    queue = Queue(tmp_path)
    for step in (10, 20, 30):
        put(queue, step)
    held = queue.claim_next()  # 1 is being evaluated: it stays
    assert queue.make_room(4, skip=True, timeout=0) and len(queue.waiting()) == 3  # room: nothing skipped
    assert queue.make_room(2, skip=True, poll=0.01, timeout=1)
    assert [e.seq for e in queue.waiting()] == [1]
    assert [e.seq for e in queue.entries()] == [1]  # 2 and 3 deleted
    assert queue.result(2)["skipped"] == queue.result(3)["skipped"] == SKIPPED
    assert queue.result(3)["tags"]["update"] == 30
    # everything waiting is claimed: skip cannot make room, so it waits
    assert not queue.make_room(1, skip=True, poll=0.01, timeout=0.05)
    held.release()


def test_reconcile_redoes_a_cut_short_clean_up(tmp_path):
    """A sidecar killed after the verdict was written and before it moved or deleted snapshots."""
    queue = Queue(tmp_path)
    for step in (10, 20, 30, 40):
        put(queue, step)
    queue.keep(1)
    verdict = {"decided_through": 3, "decided": [1, 2, 3], "keep": [2], "stop": False, "state": None}
    queue.write_verdict(verdict)
    queue.reconcile()
    assert [e.seq for e in queue.entries("kept")] == [2]  # the kept one moved, the old kept one deleted
    assert [e.seq for e in queue.entries()] == [4]  # 3, decided and not kept: deleted; 4 not decided yet
    assert queue.find(2).path == queue.path("kept", "000002-g0-u20")
    queue.reconcile()  # idempotent
    assert [e.seq for e in queue.entries("kept")] == [2] and [e.seq for e in queue.entries()] == [4]


def test_reconcile_without_a_rule_deletes_nothing(tmp_path):
    queue = Queue(tmp_path)
    put(queue, 10)
    queue.write_verdict({"decided_through": 1, "decided": [1], "keep": None, "stop": False, "state": None})
    queue.reconcile()
    assert [e.seq for e in queue.entries()] == [1]


def test_disk_use_counts_waiting_and_kept_snapshots(tmp_path):
    queue = Queue(tmp_path)
    put(queue, 10, "a" * 100), put(queue, 20, "b" * 50)
    queue.keep(1)
    assert queue.disk_use() == 150


def test_the_manifest_reads_back_as_written(tmp_path):
    queue = Queue(tmp_path)
    queue.write_manifest(MANIFEST)
    assert queue.read_manifest() == MANIFEST
    with pytest.raises(InputError, match="already exists"):
        queue.write_manifest(MANIFEST)


@pytest.mark.parametrize("content, why", [
    ("{", "not a readable hand-off manifest"), ("[1, 2]", "a list, not an object"),
    ('{"format": 2}', "format 2, not 1"), ('{"format": 1, "framework": "tf"}', "run_id"),
    (json.dumps({**MANIFEST, "framework": "tf"}), "framework 'tf'"),
    (json.dumps({**MANIFEST, "queue": 0}), "queue 0"), (json.dumps({**MANIFEST, "queue": True}), "queue is True"),
    (json.dumps({**MANIFEST, "stopping": "map"}), "stopping"), ('{"format": NaN}', "NaN is not JSON"),
    (b"\xff\xfe", "not a readable"),
])
def test_a_damaged_or_foreign_manifest_is_an_error_naming_it(tmp_path, content, why):
    queue = Queue(tmp_path)
    queue.create()
    path = Path(queue.path("manifest.json"))
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError, match=why) as found:
        queue.read_manifest()
    assert str(path) in str(found.value)


def test_a_manifest_that_is_no_regular_file_is_refused_without_blocking(tmp_path):
    queue = Queue(tmp_path)
    queue.create()
    os.mkfifo(queue.path("manifest.json"))
    with pytest.raises(InputError, match="not a regular file"):
        queue.read_manifest()


@pytest.mark.parametrize("name, content, why", [
    ("verdict.json", '{"decided_through": -1}', "decided_through is -1"),
    ("verdict.json", '{"decided_through": 1, "decided": [1], "keep": "all", "stop": false, "state": null}', "keep"),
    ("verdict.json", "[]", "not a hand-off verdict"),
    ("results/000001.json", '{"seq": 2, "tags": {}, "skipped": "x"}', "not the hand-off result of snapshot 1"),
    ("results/000001.json", '{"seq": 1, "tags": {}}', "neither evaluated nor a reason"),
    ("results/000001.json", '{"seq": 1, "tags": {}, "skipped": 3}', "neither evaluated nor a reason"),
])
def test_a_damaged_verdict_or_result_is_an_error_naming_it(tmp_path, name, content, why):
    queue = Queue(tmp_path)
    queue.create()
    path = Path(queue.path(name))
    path.write_text(content)
    with pytest.raises(InputError, match=why) as found:
        queue.read_verdict() if name == "verdict.json" else queue.result(1)
    assert str(path) in str(found.value)


def test_two_trainers_on_one_queue_are_refused(tmp_path):
    queue = Queue(tmp_path)
    fd = queue.lock_trainer()
    with pytest.raises(InputError, match="another training process"):
        queue.lock_trainer()
    os.close(fd)
    os.close(queue.lock_trainer())


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid runs nothing now
    return child.pid


def test_the_trainer_is_training_done_failed_dead_or_absent(tmp_path):
    queue = Queue(tmp_path)
    queue.create()
    assert trainer_status(queue, Liveness()) == "absent"
    beat = Heartbeat.of_trainer(queue, run_id="r1")
    beat.beat()
    assert trainer_status(queue, Liveness()) == "training"
    record = read_heartbeat(beat.path)
    assert (record["pid"], record["beat"], record["role"], record["run_id"]) == (os.getpid(), 1, "trainer", "r1")
    Path(beat.path).write_text(json.dumps({**record, "pid": dead_pid()}))
    assert trainer_status(queue, Liveness()) == "dead"
    for state in ("done", "failed"):
        beat.beat(state=state)
        assert trainer_status(queue, Liveness()) == state


def test_a_heartbeat_thread_beats_until_stopped(tmp_path):
    beat = Heartbeat(str(tmp_path / "beat.json"), "sidecar").start(interval=0.01)
    time.sleep(0.1)
    beat.stop("done")
    record = read_heartbeat(beat.path)
    assert record["beat"] > 2 and record["state"] == "done"
    assert read_heartbeat(beat.path) == record  # nothing beats after stop


def test_a_remote_process_is_alive_while_its_beat_moves_on_the_reader_s_clock():
    now = [0.0]
    liveness = Liveness(stale_s=60, clock=lambda: now[0])
    record = {"pid": 1, "host": "elsewhere", "beat": 5, "state": "training", "time": 0.0}
    assert liveness.alive(record)
    now[0] = 59
    assert liveness.alive(record)
    now[0] = 61
    assert not liveness.alive(record)  # the beat has not moved for 61 s of this clock
    assert liveness.alive({**record, "beat": 6, "time": -1e9})  # it moved: alive, whatever its own clock says


@pytest.mark.parametrize("content", ["{}", '{"pid": "1", "host": "h", "beat": 1, "state": "training", "time": 0}',
                                     '{"pid": 1, "host": "h", "beat": 1, "state": "asleep", "time": 0}', "x"])
def test_a_damaged_heartbeat_is_an_error_naming_it(tmp_path, content):
    path = tmp_path / "trainer.json"
    path.write_text(content)
    with pytest.raises(InputError) as found:
        read_heartbeat(str(path))
    assert str(path) in str(found.value)
