"""nbest_eval.training.timeline: each hand-off's lag, from a results view written by hand."""

import json

import pytest

from nbest_eval.data import InputError
from nbest_eval.training.timeline import lag_summary, timeline


def write_results(run_dir, results):
    queue = run_dir / "nbest-async"
    queue.mkdir(parents=True)
    (queue / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))


def result(seq, update, handed, evaluated, **extra):
    return {"seq": seq, "tags": {"seq": seq, "gen": 0, "update": update, "epoch": seq},
            "values": {"map": 0.1 * seq}, "n_prompts": 5,
            "timings": {"handed_off_at": handed, "evaluated_at": evaluated, "nbest_gen_s": 1.5}, **extra}


def test_lags_count_the_seconds_and_the_validations_handed_off_meanwhile(tmp_path):
    # hand-offs at 100, 110, 120, 130; results at 108 (before the next), 125 (after 110 and 120), 131, 140
    write_results(tmp_path, [result(1, 10, 100.0, 108.0), result(2, 20, 110.0, 125.0),
                             result(3, 30, 120.0, 131.0), result(4, 40, 130.0, 140.0)])
    rows = timeline(tmp_path)
    assert [(r.seq, r.step, r.epoch, r.n_prompts) for r in rows] == [(1, 10, 1, 5), (2, 20, 2, 5), (3, 30, 3, 5),
                                                                     (4, 40, 4, 5)]
    assert [r.lag_s for r in rows] == [8.0, 15.0, 11.0, 10.0]
    assert [r.lag_validations for r in rows] == [0, 1, 1, 0]
    assert rows[0].values == {"map": 0.1} and rows[0].timings["nbest_gen_s"] == 1.5 and rows[0].reason is None
    assert timeline(tmp_path / "nbest-async") == rows  # the queue folder itself names the same run
    assert lag_summary(rows) == {"evaluated": 4, "not_evaluated": 0, "lag_s_mean": 11.0, "lag_s_max": 15.0,
                                 "lag_validations_max": 1}


def test_a_skipped_hand_off_has_no_values_and_no_lag_in_the_summary(tmp_path):
    skipped = {"seq": 2, "tags": {"seq": 2, "gen": 0, "update": 20, "epoch": 2}, "skipped": "a newer snapshot waited"}
    write_results(tmp_path, [result(1, 10, 100.0, 104.0), skipped])
    rows = timeline(tmp_path)
    assert (rows[1].values, rows[1].reason, rows[1].lag_s) == (None, "a newer snapshot waited", None)
    assert lag_summary(rows) == {"evaluated": 1, "not_evaluated": 1, "lag_s_mean": 4.0, "lag_s_max": 4.0,
                                 "lag_validations_max": 0}


@pytest.mark.parametrize("text", ["not json\n", json.dumps({"tags": {"update": 3}}) + "\n"])
def test_a_bad_results_view_is_named(tmp_path, text):
    (tmp_path / "nbest-async").mkdir()
    (tmp_path / "nbest-async" / "results.jsonl").write_text(text)
    with pytest.raises(InputError, match="results.jsonl"):
        timeline(tmp_path)


def test_a_run_without_a_queue_is_named(tmp_path):
    with pytest.raises(InputError, match="not the results of an async run"):
        timeline(tmp_path)
