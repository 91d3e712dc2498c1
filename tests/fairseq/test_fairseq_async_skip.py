"""--nbest-async-skip in a real run (issue 33): a tiny fairseq run hands off to a sidecar made slow
(the NBEST_EVAL_SIDECAR_DELAY test hook), so older waiting snapshots are skipped. The evaluated ones
give the loop's values at their updates, and the verdict, stop and kept checkpoint are the rule's
replayed over the evaluated validations only (the loop's values at those updates). CPU only, one
thread per process."""

import json
import os
import subprocess
from types import SimpleNamespace

import pytest
from fairseq_runs import ENV, train, train_command, valid_records

pytest.importorskip("fairseq", reason="fairseq is not installed (make venv installs it)")

from nbest_eval.cli.watch import DELAY_ENV  # noqa: E402
from nbest_eval.training.early_stopping import EarlyStopping  # noqa: E402
from nbest_eval.training.handoff import SKIPPED, Queue  # noqa: E402

pytestmark = pytest.mark.training  # trains models: left out by `make test-fast`
EPOCHS = 14
#: the rule of the async run: strict patience 1 on MAP after a warm-up of 3 validations
RULE = EarlyStopping("map", "strict", patience=1, warmup=3)
STOPPING = ("--patience", RULE.patience, "--nbest-stopping", RULE.rule, "--nbest-stopping-warmup", RULE.warmup)
DELAY_S = 3  # per evaluation: several epochs of the tiny run, so snapshots wait and are skipped


@pytest.fixture(scope="module")
def unstopped_loop_run(fairseq_corpus):
    """The loop run with no rule: every epoch validated, each validation's lists and values saved."""
    save = fairseq_corpus.root / "skip-loop"
    result = train(fairseq_corpus, save, "--max-epoch", EPOCHS, "--nbest-save-dir", save / "nbest")
    result.save = save
    return result


@pytest.fixture(scope="module")
def skipping_run(fairseq_corpus):
    """The same run in async mode, queue 2 with skipping, its child sidecar slowed down."""
    save = fairseq_corpus.root / "skip-async"
    command = train_command(fairseq_corpus, save, "--max-epoch", EPOCHS, *STOPPING, "--nbest-mode", "async",
                            "--nbest-async-device", "cpu", "--nbest-async-queue", 2, "--nbest-async-skip")
    log = fairseq_corpus.root / "skip-async.log"
    with open(log, "w") as out:  # the child sidecar inherits the delay
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env={**ENV, DELAY_ENV: str(DELAY_S)})
    text = log.read_text()
    assert code.returncode == 0, text[-4000:]
    return SimpleNamespace(log=text, valid=valid_records(text), save=save, queue=Queue(save))


def loop_values(run, update: int) -> dict:
    """The values the loop saved for its validation at ``update`` (full precision)."""
    found = list((run.save / "nbest").glob(f"valid.epoch*.update{update}.json"))
    assert len(found) == 1, (update, found)
    return json.loads(found[0].read_text())


def test_skipped_validations_are_recorded_and_evaluated_ones_are_the_loops(unstopped_loop_run, skipping_run):
    results = skipping_run.queue.results()
    updates = [int(record["valid_num_updates"]) for record in skipping_run.valid]
    assert list(results) == list(range(1, len(updates) + 1))  # every validation handed off, one result each
    assert [result["tags"]["update"] for result in results.values()] == updates
    skipped = [result for result in results.values() if "skipped" in result]
    evaluated = [result for result in results.values() if "values" in result]
    assert skipped and all(result["skipped"] == SKIPPED for result in skipped)
    assert len(evaluated) + len(skipped) + sum("not_evaluated" in r for r in results.values()) == len(results)
    for result in evaluated:  # the loop's values at the same update, exactly (an undefined one logged as 0)
        expected = loop_values(unstopped_loop_run, result["tags"]["update"])
        assert {k: 0.0 if v is None else v for k, v in result["values"].items()} == \
            {k: expected[k] for k in result["values"]}, result["tags"]
    for result in skipped:
        epoch, update = result["tags"]["epoch"], result["tags"]["update"]
        assert f"sidecar: epoch {epoch}, update {update}: not evaluated: {SKIPPED}" in skipping_run.log
        decided = json.loads(open(skipping_run.queue.path("decisions", f"{result['seq']:06d}.json")).read())
        assert decided["not_decided"] == SKIPPED


def test_the_verdict_is_the_rules_over_the_evaluated_validations_only(unstopped_loop_run, skipping_run):
    """Patience counts evaluated validations: the rule replayed over the loop's values at the
    evaluated updates gives the verdict, the stop and the kept checkpoint; the stop comes no earlier
    in updates than the loop's would (the rule replayed over every validation)."""
    queue = skipping_run.queue
    evaluated = [result for result in queue.results().values() if "values" in result]
    values = [loop_values(unstopped_loop_run, r["tags"]["update"])[RULE.key] for r in evaluated]
    decisions, stop = RULE.replay(values)
    verdict = queue.read_verdict()
    assert verdict["validations"] == len(decisions) == len(evaluated)  # none evaluated after the stop
    assert verdict["stop"] == (stop is not None)
    kept = evaluated[decisions[-1].kept]
    assert verdict["kept"]["seq"] == kept["seq"] and verdict["kept"]["step"] == kept["tags"]["update"]
    assert sorted(os.listdir(queue.path("kept"))) == [kept["tags"]["name"]] and not os.listdir(queue.path("snapshots"))
    best = os.path.realpath(skipping_run.save / "checkpoint_best.pt")
    assert best == os.path.realpath(queue.path(verdict["kept"]["path"]))
    every = [loop_values(unstopped_loop_run, int(r["valid_num_updates"]))[RULE.key] for r in unstopped_loop_run.valid]
    _, loop_stop = RULE.replay(every)
    if stop is not None:
        assert verdict["stop_seq"] == evaluated[stop]["seq"]
        assert loop_stop is not None and \
            evaluated[stop]["tags"]["update"] >= int(unstopped_loop_run.valid[loop_stop]["valid_num_updates"])
    if len(skipping_run.valid) < EPOCHS:  # only the verdict ends training early (once it arrives)
        assert stop is not None and "early stop since valid performance hasn't improved" in skipping_run.log
