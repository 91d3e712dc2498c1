"""NBestEvalCallback(mode="async") with two training processes (issue 33): the tiny run of
test_hf_async.py under torchrun (two CPU processes, gloo), in the loop and in async mode (a child
sidecar on the CPU). Rank 0 alone hands off; every rank gets its news. Each evaluation's measures,
the stop and the kept weights are the two-process loop's, on both ranks.

Run as a script (``torchrun --nproc_per_node 2 tests/hf/test_hf_async_ddp.py OUT DATA``) it is the
worker: each rank trains the loop run, then the async run, and writes what it saw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.training  # trains in two torchrun processes: left out by `make test-fast`

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("nbest_eval.hf")

from nbest_eval.training.handoff import Queue  # noqa: E402

MODES = ("loop", "async")


@pytest.fixture(scope="module")
def two_process_runs(synth_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp-async")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(Path(__file__).resolve()), str(out), str(synth_dir)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    seen = {(mode, rank): json.loads((out / f"{mode}-rank{rank}.json").read_text()) for mode in MODES
            for rank in (0, 1)}
    return out, seen, proc.stdout + proc.stderr


def test_two_async_processes_make_the_two_process_loops_measures_stop_and_weights(two_process_runs):
    out, seen, output = two_process_runs
    loop = seen["loop", 0]
    expected = loop["evaluations"]
    max_steps = loop["max_steps"]
    assert expected and loop["global_step"] < max_steps  # the loop stopped early
    for rank in (0, 1):
        assert seen["loop", rank]["evaluations"] == expected  # the loop's ranks agree (all-reduced)
        found = seen["async", rank]["evaluations"]
        # equal: the loop sums each rank's statistics and then the two sums, the sidecar (one process) all
        # prompts in turn; BLEU's are counts and this run's MAP is 0, so the order cannot show
        assert {step: found[step] for step in expected} == expected, rank
        assert all(int(step) <= max(map(int, expected)) for step in found)  # nothing after the stop evaluated
    queue = Queue(out / "async")
    verdict = queue.read_verdict()
    stop_step = max(map(int, expected))
    assert verdict["stop"] and queue.result(verdict["stop_seq"])["tags"]["step"] == stop_step
    kept = int(Path(loop["best_model_checkpoint"]).name.rsplit("-", 1)[1])
    assert kept < stop_step and verdict["kept"]["step"] == kept
    steps = {rank: seen["async", rank]["global_step"] for rank in (0, 1)}
    assert steps[0] == steps[1] and stop_step < steps[0] <= loop["global_step"] + 4 * loop["eval_steps"], steps
    kept_folder = os.path.realpath(queue.path(verdict["kept"]["path"]))
    for rank in (0, 1):  # every rank took the rule's snapshot as its best, and loaded it
        ran = seen["async", rank]
        assert os.path.realpath(ran["best_model_checkpoint"]) == kept_folder
        assert ran["best_global_step"] in (kept, None)  # None: a transformers without best_global_step
    weights = {key: torch.load(out / f"{key[0]}-rank{key[1]}.pt") for key in seen}
    reference = weights["loop", 0]
    for key, state in weights.items():
        assert state.keys() == reference.keys() and all(torch.equal(state[n], reference[n]) for n in state), key
    assert "Traceback" not in output


def worker(out: str, data: str) -> None:
    """One rank: the tiny run in the loop, then in async mode; writes MODE-rankN.json and its final weights."""
    import torch.distributed as dist
    from test_hf_async import EVAL_STEPS, MAX_STEPS, eval_entries, tiny_trainer  # tests/hf is this script's folder

    for mode in MODES:
        trainer = tiny_trainer(Path(out) / mode, Path(data), mode)
        trainer.train()
        rank, state = dist.get_rank(), trainer.state
        torch.save(trainer.model.state_dict(), Path(out) / f"{mode}-rank{rank}.pt")
        (Path(out) / f"{mode}-rank{rank}.json").write_text(json.dumps(
            {"evaluations": eval_entries(trainer), "global_step": state.global_step,
             "best_global_step": getattr(state, "best_global_step", None),
             "best_model_checkpoint": state.best_model_checkpoint,
             "max_steps": MAX_STEPS, "eval_steps": EVAL_STEPS}))


if __name__ == "__main__":
    worker(*sys.argv[1:3])
