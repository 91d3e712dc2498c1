"""The sidecar loop (training.sidecar, issue 33) over n-best files as snapshots: its measures, its
stopping verdict and its kept snapshot equal select's stopping replay over the same files and the
decision core run directly (the oracles), and hand-computed cases; it evaluates each snapshot once
with two sidecars on one queue and after a sidecar is SIGKILLed mid-evaluation; it decides in
training order whatever order results arrive in; it drains and exits when the trainer is done or dead;
skipped snapshots never reach the rule."""

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from cases import quality_lists

from nbest_eval import Gold, GoldPrompt, Hyp, InputError
from nbest_eval.formats import read_nbest, write_nbest
from nbest_eval.scorer import Scorer
from nbest_eval.selection import select_checkpoints
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import EarlyStopping, State
from nbest_eval.training.handoff import Queue, Tags
from nbest_eval.training.handoff_files import read_json
from nbest_eval.training.heartbeat import Heartbeat
from nbest_eval.training.sidecar import AFTER_STOP, BestValue, ListsEvaluator, decide_pending, result_of, watch

REPO = Path(__file__).resolve().parents[2]
KEYS = ["map", "p1"]
#: each checkpoint's share of prompts whose valid translations come first: up, a plateau, then down
QUALITY = [0.1, 0.4, 0.7, 0.7, 0.6, 0.3, 0.2, 0.1, 0.1, 0.1]


@pytest.fixture
def snapshot_lists(tmp_path):
    """Ten checkpoints' n-best files (tsv) on a 30-prompt gold, of the quality QUALITY says."""
    return quality_lists(tmp_path, QUALITY)


def patient(limit=30.0):
    """A sleep for watch that fails the test instead of hanging when the queue never drains."""
    deadline = time.monotonic() + limit

    def sleep(seconds):
        assert time.monotonic() < deadline, "the sidecar did not finish"
        time.sleep(seconds)
    return sleep


def enqueue(queue, paths, first=1):
    """Hand each file off as the snapshot of epoch first+i, update 100 * (first+i)."""
    for i, path in enumerate(paths, first):
        queue.put(lambda partial, path=path: shutil.copy(path, partial), Tags(None, 0, 100 * i, "u", i))


def direct(rule, gold, paths, steps=None):
    """The oracle: the decision core run directly on each file's per-prompt statistics, until it stops."""
    scorer, state, decisions = Scorer(KEYS), State(), []
    for i, path in enumerate(paths):
        stats = PerPrompt(scorer, scorer.score(gold, read_nbest(path, gold), keep_per_prompt=True).per_prompt)
        state, decision = rule.decide(state, stats=stats, step=(steps or [100 * (k + 1) for k in range(len(paths))])[i],
                                      gold=gold.digest())
        decisions.append(decision)
        if decision.stop:
            break
    return state, decisions


def decisions_of(queue, seqs):
    return [read_json(queue.path("decisions", f"{seq:06d}.json"), "decision")["decision"] for seq in seqs]


@pytest.mark.parametrize("rule", ["strict", "significant", "proportional", "declined"])
def test_the_sidecar_decides_as_select_s_replay_and_the_decision_core(tmp_path, snapshot_lists, rule):
    gold, paths = snapshot_lists
    stopping = EarlyStopping("map", rule, patience=2)
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths)
    summary = watch(queue, ListsEvaluator(gold, Scorer(KEYS)), stopping, until="drained", poll=0.01,
                    sleep=patient())

    replay = select_checkpoints(paths, gold, Scorer(KEYS), lambda path: read_nbest(path, gold), stopping=stopping,
                                n_samples=100)
    state, decisions = direct(stopping, gold, paths)
    trained = len(decisions)
    assert replay.selection.stopping.stopped_after == (trained - 1 if decisions[-1].stop else None)
    assert replay.selection.stopping.kept == decisions[-1].kept  # the two oracles agree

    assert summary.evaluated == list(range(1, trained + 1))
    assert summary.not_evaluated == list(range(trained + 1, len(paths) + 1))  # after the stop
    results = queue.results()
    for seq in summary.evaluated:  # the same measures as select's, exactly
        assert results[seq]["values"] == replay.systems[seq - 1].values
    assert all(results[seq]["not_evaluated"] == AFTER_STOP for seq in summary.not_evaluated)
    assert decisions_of(queue, summary.evaluated) == [asdict(d) for d in decisions]
    verdict = queue.read_verdict()
    assert verdict["state"] == state.to_dict() and verdict["decided"] == summary.evaluated
    assert verdict["stop"] == decisions[-1].stop
    assert verdict["stop_seq"] == (trained if decisions[-1].stop else None)
    kept = decisions[-1].kept + 1
    assert verdict["kept"]["seq"] == verdict["keep"][0] == kept and verdict["kept"]["step"] == 100 * kept
    kept_path = queue.path(verdict["kept"]["path"])
    assert [e.seq for e in queue.entries("kept")] == [kept] and queue.entries() == []  # the rest deleted
    assert Path(kept_path).read_bytes() == Path(paths[kept - 1]).read_bytes()
    assert len(Path(queue.path("results.jsonl")).read_text().splitlines()) == len(paths)


def test_the_rules_stop_and_keep_where_the_fixture_means_them_to(tmp_path, snapshot_lists):
    """The equality above is worth something only if the rules stop, and keep other than the first."""
    gold, paths = snapshot_lists
    for rule in ("strict", "significant", "proportional"):
        _, decisions = direct(EarlyStopping("map", rule, patience=2), gold, paths)
        assert decisions[-1].stop and decisions[-1].kept > 0, rule


@pytest.fixture
def two_prompt_gold():
    return Gold([GoldPrompt("a", "x", (("um", 1.0),)), GoldPrompt("b", "y", (("dois", 1.0),))])


def test_a_hand_computed_strict_run(tmp_path, two_prompt_gold):
    """MAP 0.5, 1, 1, 0.5, 0.5 with strict patience 2: validation 2 improves, 3 ties it (kept: the
    latest of ties; one without improvement), 4 is the second without: stop; 5 is never evaluated."""
    half, full = {"a": [Hyp("um")], "b": [Hyp("tres")]}, {"a": [Hyp("um")], "b": [Hyp("dois")]}
    paths = []
    for i, lists in enumerate([half, full, full, half, half]):
        paths.append(str(tmp_path / f"c{i}.tsv"))
        write_nbest(lists, paths[-1], "tsv")
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths)
    summary = watch(queue, ListsEvaluator(two_prompt_gold, Scorer(["map"])), EarlyStopping("map", "strict", 2),
                    until="drained", poll=0.01, sleep=patient())
    assert summary.evaluated == [1, 2, 3, 4] and summary.not_evaluated == [5]
    assert [queue.result(seq)["values"]["map"] for seq in (1, 2, 3, 4)] == [0.5, 1.0, 1.0, 0.5]
    assert [(d["improved"], d["kept"], d["runs"], d["stop"]) for d in decisions_of(queue, [1, 2, 3, 4])] == \
        [(True, 0, 0, False), (True, 1, 0, False), (False, 2, 1, False), (False, 2, 2, True)]
    verdict = queue.read_verdict()
    assert (verdict["stop_seq"], verdict["kept"]["seq"], verdict["kept"]["value"]) == (4, 3, 1.0)
    assert [e.tags.name for e in queue.entries("kept")] == ["000003-g0-u300-e3"]


def test_results_arriving_out_of_order_are_decided_in_order(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    stopping, evaluator = EarlyStopping("map", "significant", 5), ListsEvaluator(gold, Scorer(KEYS))
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:3])
    first = queue.claim_next()  # 1 is being evaluated (slowly) elsewhere
    with queue.claim_next() as second:
        entry = second.entry
        queue.put_result(entry.seq, result_of(entry, evaluator.evaluate(entry.path, entry.tags), time.time()))
    assert decide_pending(queue, stopping, evaluator.scorer, gold) == []  # 2 waits for 1
    assert queue.read_verdict() is None
    first.release()
    summary = watch(queue, evaluator, stopping, until="drained", poll=0.01, sleep=patient())
    assert summary.evaluated == [1, 3]
    assert decisions_of(queue, [1, 2, 3]) == [asdict(d) for d in direct(stopping, gold, paths[:3])[1]]


class Counting(ListsEvaluator):
    """Records every evaluation it finishes, and takes a little random time over each."""

    def __init__(self, *args, log, lock, delay=0.02):
        super().__init__(*args)
        self.log, self.lock, self.rng, self.delay = log, lock, random.Random(), delay

    def evaluate(self, path, tags):
        time.sleep(self.rng.uniform(0, self.delay))
        found = super().evaluate(path, tags)
        with self.lock:
            self.log.append(tags.seq)
        return found


def test_two_sidecars_never_evaluate_one_snapshot_twice(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    stopping = EarlyStopping("map", "declined", 20)  # never stops here: every snapshot is evaluated
    queue = Queue(tmp_path / "run")
    trainer = Heartbeat.of_trainer(queue)
    trainer.beat()
    log, lock, summaries = [], threading.Lock(), []

    def produce():
        for i, path in enumerate(paths * 2, 1):
            enqueue(queue, [path], first=i)
            time.sleep(0.005)
        trainer.beat(state="done")

    def sidecar():
        summaries.append(watch(queue, Counting(gold, Scorer(KEYS), log=log, lock=lock), stopping, poll=0.005,
                               sleep=patient(60)))

    threads = [threading.Thread(target=f) for f in (produce, sidecar, sidecar)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    seqs = list(range(1, 2 * len(paths) + 1))
    assert sorted(log) == seqs  # each evaluated exactly once
    assert sorted(summaries[0].evaluated + summaries[1].evaluated) == seqs
    assert {s.reason for s in summaries} == {"trainer-done"}
    state, decisions = direct(stopping, gold, paths * 2, [100 * s for s in seqs])
    assert queue.read_verdict()["state"] == state.to_dict()
    assert decisions_of(queue, seqs) == [asdict(d) for d in decisions]


SLOW_SIDECAR = """\
import sys, time
from nbest_eval.formats import read_gold
from nbest_eval.scorer import Scorer
from nbest_eval.training.early_stopping import EarlyStopping
from nbest_eval.training.handoff import Queue
from nbest_eval.training.sidecar import ListsEvaluator, watch

class Stuck(ListsEvaluator):
    def evaluate(self, path, tags):
        print(tags.seq, flush=True)
        time.sleep(120)

watch(Queue(sys.argv[1]), Stuck(read_gold(sys.argv[2]), Scorer(["map", "p1"])),
      EarlyStopping("map", "significant", 5), until="drained", poll=0.01)
"""


def test_a_sidecar_killed_mid_evaluation_leaves_its_snapshot_to_the_next(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    stopping = EarlyStopping("map", "significant", 5)
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:3])
    child = subprocess.Popen([sys.executable, "-c", SLOW_SIDECAR, queue.root, str(tmp_path / "gold.txt")],
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert child.stdout.readline().strip() == "1"  # it holds the claim of 1, evaluating
        with queue.claim_next() as other:
            assert other.entry.seq == 2
    finally:
        child.kill()
        child.wait()
    log = []
    summary = watch(queue, Counting(gold, Scorer(KEYS), log=log, lock=threading.Lock()), stopping,
                    until="drained", poll=0.01, sleep=patient())
    assert summary.evaluated == log == [1, 2, 3]
    assert all(queue.result(seq)["sidecar"]["pid"] == os.getpid() for seq in (1, 2, 3))
    assert decisions_of(queue, [1, 2, 3]) == [asdict(d) for d in direct(stopping, gold, paths[:3])[1]]


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_trainer_makes_the_sidecar_drain_the_queue_and_exit(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:2])
    trainer = Heartbeat.of_trainer(queue)
    trainer.record["pid"] = dead_pid()  # it died without saying so (SIGKILL)
    trainer.beat()
    summary = watch(queue, ListsEvaluator(gold, Scorer(KEYS)), None, poll=0.01, sleep=patient())
    assert (summary.evaluated, summary.reason) == ([1, 2], "trainer-dead")


def test_a_snapshot_handed_off_just_before_done_is_still_evaluated(tmp_path, snapshot_lists):
    """The sidecar reads the trainer's state before it lists the queue, so nothing put before
    'done' is missed; without a rule, nothing is deleted."""
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    trainer = Heartbeat.of_trainer(queue)
    trainer.beat()
    calls = []

    def sleep(seconds):
        calls.append(seconds)
        assert len(calls) < 1000, "the sidecar did not finish"
        if len(calls) == 1:
            enqueue(queue, paths[:1])
            trainer.beat(state="done")

    summary = watch(queue, ListsEvaluator(gold, Scorer(KEYS)), None, poll=0.01, sleep=sleep)
    assert (summary.evaluated, summary.reason) == ([1], "trainer-done")
    assert [e.seq for e in queue.entries()] == [1] and queue.read_verdict()["decided"] == [1]


def test_skipped_snapshots_never_reach_the_rule(tmp_path, snapshot_lists):
    """--nbest-async-skip with no sidecar running: at each hand-off with K=2 waiting, the unclaimed
    ones are skipped, so only the newest waits; the rule sees the evaluated validations only."""
    gold, paths = snapshot_lists
    stopping = EarlyStopping("map", "significant", 5)
    queue = Queue(tmp_path / "run")
    for i, path in enumerate(paths[:4], 1):
        assert queue.make_room(2, skip=True, timeout=1)
        enqueue(queue, [path], first=i)
    assert [e.seq for e in queue.waiting()] == [3, 4]
    summary = watch(queue, ListsEvaluator(gold, Scorer(KEYS)), stopping, until="drained", poll=0.01,
                    sleep=patient())
    assert summary.evaluated == [3, 4]
    assert [read_json(queue.path("decisions", f"00000{s}.json"), "d").get("not_decided") for s in (1, 2)] == \
        [queue.result(1)["skipped"]] * 2
    verdict = queue.read_verdict()
    assert verdict["decided"] == [3, 4] and verdict["validations"] == 2
    assert decisions_of(queue, [3, 4]) == [asdict(d) for d in direct(stopping, gold, paths[2:4], [300, 400])[1]]


def test_a_verdict_of_another_rule_is_refused(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:1])
    watch(queue, ListsEvaluator(gold, Scorer(KEYS)), EarlyStopping("map", "strict", 2), until="drained",
          poll=0.01, sleep=patient())
    with pytest.raises(InputError, match="decided by another rule") as found:
        decide_pending(queue, EarlyStopping("map", "strict", 3), Scorer(KEYS), gold)
    assert queue.path("verdict.json") in str(found.value)


def test_a_result_whose_statistics_are_not_of_this_gold_is_an_error_naming_it(tmp_path, snapshot_lists,
                                                                              two_prompt_gold):
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:1])
    watch(queue, ListsEvaluator(gold, Scorer(KEYS)), None, until="drained", poll=0.01, sleep=patient())
    other = Queue(tmp_path / "other")
    enqueue(other, paths[:1])
    shutil.copy(queue.path("results", "000001.json"), other.path("results", "000001.json"))
    with pytest.raises(InputError, match="not of this gold") as found:
        decide_pending(other, EarlyStopping("map", "strict", 2), Scorer(KEYS), two_prompt_gold)
    assert other.path("results", "000001.json") in str(found.value)


@pytest.mark.parametrize("maximize", [True, False])
def test_without_a_rule_the_best_value_so_far_is_kept_and_the_rest_deleted(tmp_path, snapshot_lists, maximize):
    gold, paths = snapshot_lists
    files = [paths[0], paths[2], paths[2], paths[1], paths[7]]  # the third repeats the second: a tie
    queue = Queue(tmp_path / "run")
    enqueue(queue, files)
    watch(queue, ListsEvaluator(gold, Scorer(KEYS)), None, until="drained", poll=0.01, sleep=patient(),
          best=BestValue("map", maximize))
    values = [Scorer(KEYS).score(gold, read_nbest(path, gold)).values["map"] for path in files]
    best = max(values) if maximize else min(values)
    # a later equal value replaces the kept one, as fairseq's checkpoint_best.pt does
    expected = 1 + max(i for i, value in enumerate(values) if value == best)
    if maximize:
        assert values[1] == values[2] == best and expected == 3
    kept = queue.read_verdict()["kept"]
    verdict = queue.read_verdict()
    assert (kept["seq"], kept["step"], kept["value"]) == (expected, 100 * expected, best)
    assert not verdict["stop"] and verdict["validations"] == len(files)
    assert [entry.seq for entry in queue.entries("kept")] == [expected] and queue.entries("snapshots") == []


def test_without_a_rule_or_a_measure_to_keep_every_evaluated_snapshot_goes(tmp_path, snapshot_lists):
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:3])
    watch(queue, ListsEvaluator(gold, Scorer(KEYS)), None, until="drained", poll=0.01, sleep=patient(),
          best=BestValue(None))
    assert queue.read_verdict()["kept"] is None and queue.entries("kept") == queue.entries("snapshots") == []
    assert sorted(queue.results()) == [1, 2, 3]


def test_a_result_names_its_saved_lists_by_an_absolute_path(tmp_path, snapshot_lists, monkeypatch):
    """A resume sets superseded lists aside by the path their result names, from another directory
    than the sidecar's: a relative --nbest-save-dir must not make that path relative."""
    gold, paths = snapshot_lists
    queue = Queue(tmp_path / "run")
    enqueue(queue, paths[:1])
    entry = queue.waiting()[0]
    evaluation = replace(ListsEvaluator(gold, Scorer(KEYS)).evaluate(entry.path, entry.tags), nbest="lists/e1.tsv")
    monkeypatch.chdir(tmp_path)
    assert result_of(entry, evaluation, time.time())["lists"] == str(tmp_path / "lists" / "e1.tsv")
