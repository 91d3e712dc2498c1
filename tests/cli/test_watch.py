"""`nbest-eval watch` (issue 33) on a queue of n-best files (framework "lists"): one line per result,
the verdict and kept snapshot of the rule the manifest names, equal to the sidecar loop's; what it
refuses. The fairseq sidecar runs in tests/fairseq/test_fairseq_async.py."""

import json
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cases import random_case

from nbest_eval import Hyp
from nbest_eval.cli import main
from nbest_eval.cli.watch import DELAY_ENV
from nbest_eval.formats import read_nbest, write_gold, write_nbest
from nbest_eval.scorer import Scorer
from nbest_eval.training.handoff import Queue, Tags
from nbest_eval.training.heartbeat import Heartbeat


def lists_queue(tmp_path, n=4, patience=1):
    gold, nbest = random_case(3, n_prompts=12, nil_prompts=False)
    write_gold(gold, tmp_path / "gold.txt")
    queue = Queue(tmp_path / "run")
    queue.write_manifest({"format": 1, "framework": "lists", "run_id": "t", "queue": 2, "skip": False,
                          "gold": {"path": str(tmp_path / "gold.txt")}, "settings": {"metrics": "map,p1"},
                          "stopping": {"key": "map", "rule": "strict", "patience": patience}})
    for i in range(1, n + 1):  # quality falls (prompt j's gold comes first iff i divides j): strict patience 1
        lists = {p.id: ([Hyp(t) for t, _ in p.translations] if j % i == 0 else []) + nbest.get(p.id, [])
                 for j, p in enumerate(gold)}  # keeps the first and stops at the second
        write_nbest(lists, tmp_path / f"c{i}.tsv", "tsv")
        queue.put(lambda partial, i=i: shutil.copy(tmp_path / f"c{i}.tsv", partial), Tags(None, 0, 10 * i, "u", i))
    return gold, queue


def test_watch_prints_a_line_per_result_and_keeps_the_rules_pick(tmp_path, capsys):
    gold, queue = lists_queue(tmp_path)
    assert main(["watch", str(tmp_path / "run"), "--until", "drained", "--poll", "0.01"]) == 0
    out = capsys.readouterr().out.splitlines()
    scorer = Scorer(["map", "p1"])
    first = scorer.score(gold, read_nbest(str(tmp_path / "c1.tsv"), gold)).values
    assert out[0].startswith("     1  epoch 1, update 10: map " + format(first["map"], ".4f"))
    assert len(out) == 3 and out[-1].startswith("watch: 2 evaluated, 2 not evaluated (after the stop verdict); "
                                                "drained; keeping kept/000001-g0-u10-e1")
    verdict = queue.read_verdict()
    assert verdict["stop"] and verdict["stop_seq"] == 2 and verdict["kept"]["seq"] == 1
    assert not queue.waiting()


def test_watch_refuses_a_folder_without_a_queue_and_a_manifest_without_settings(tmp_path, capsys):
    assert main(["watch", str(tmp_path), "--until", "drained"]) == 2
    assert "no hand-off queue here" in capsys.readouterr().err
    Queue(tmp_path).write_manifest({"format": 1, "framework": "hf", "run_id": "t", "queue": 1, "skip": False})
    assert main(["watch", str(tmp_path)]) == 2
    assert "the manifest records no Hugging Face evaluator settings" in capsys.readouterr().err


def test_watch_started_before_its_trainer_waits_for_the_manifest(tmp_path, capsys):
    done = []
    thread = threading.Thread(target=lambda: done.append(main(["watch", str(tmp_path / "run"), "--poll", "0.01"])))
    thread.start()
    time.sleep(0.5)  # watch is polling for a manifest by now
    gold, queue = lists_queue(tmp_path)
    Heartbeat.of_trainer(queue).stop("done")  # the trainer has handed everything off and is done
    thread.join(timeout=30)
    assert done == [0]
    out = capsys.readouterr().out
    assert out.startswith(f"watch: waiting for a run to hand off to {queue.root}\n")
    assert "watch: 2 evaluated, 2 not evaluated (after the stop verdict); trainer-done" in out


def test_the_sidecar_delay_test_hook_refuses_a_bad_value(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DELAY_ENV, "soon")
    assert main(["watch", str(tmp_path), "--until", "drained"]) == 2
    assert f"{DELAY_ENV} must be a number of seconds >= 0, got 'soon'" in capsys.readouterr().err


def test_watch_writes_each_results_measures_as_tensorboard_scalars_at_its_update(tmp_path):
    """Read back from the event file: each evaluated result's measures (float32, as TensorBoard
    stores them) and its timings, at its update, under DIR/valid_sidecar; none of the rest."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, queue = lists_queue(tmp_path)
    assert main(["watch", str(tmp_path / "run"), "--until", "drained", "--poll", "0.01",
                 "--tensorboard-logdir", str(tmp_path / "tb")]) == 0
    events = EventAccumulator(str(tmp_path / "tb" / "valid_sidecar"))
    events.Reload()
    lines = [json.loads(line) for line in Path(queue.path("results.jsonl")).read_text().splitlines()]
    evaluated = [line for line in lines if "values" in line]
    assert len(evaluated) == 2 and len(lines) == 4  # the other two came after the stop verdict
    expected = {}
    for line in evaluated:
        timings = line["timings"]  # the durations, not the clock reading evaluated_at (the event's wall time)
        assert sorted(timings) == ["evaluate_s", "evaluated_at", "score_s"]
        durations = {"nbest_evaluate_s": timings["evaluate_s"], "nbest_score_s": timings["score_s"]}
        for key, value in {**line["values"], **durations}.items():
            expected.setdefault(key, []).append((line["tags"]["update"], float(np.float32(value))))
    assert sorted(events.Tags()["scalars"]) == sorted(expected)
    for tag, points in expected.items():
        assert [(e.step, e.value) for e in events.Scalars(tag)] == points, tag


def test_watch_without_tensorboard_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if neither were installed
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    assert main(["watch", str(tmp_path), "--tensorboard-logdir", str(tmp_path / "tb")]) == 2
    assert "--tensorboard-logdir needs TensorBoard: pip install tensorboard" in capsys.readouterr().err
