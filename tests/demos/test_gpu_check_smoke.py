"""scripts.gpu_check (experiments/gpu_check.py): a part that fails or runs out of time does not stop the
check, results are on disk after every row, a run past its time is stopped with its children, and the
whole check at toy size on the CPU writes every part's rows (the run skips without the STAPLE data)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from experiments import gpu_check

MACHINE = {"gpu": None, "cpu": "x86_64", "cpu_cores": 2, "torch": "2.x", "transformers": "5.x", "fairseq": "0.12"}


def new_check(tmp_path, budget=100.0):
    return gpu_check.Check(tmp_path, budget, {"started": "now", "smoke": True, "budget_s": budget,
                                              "machine": MACHINE})


def saved(tmp_path):
    return json.loads((tmp_path / "check.json").read_text())


def test_a_failing_part_keeps_its_rows_and_the_next_part_runs(tmp_path):
    def on_disk_then_fail(left):
        yield {"row": 1}
        assert saved(tmp_path)["parts"]["runs"]["rows"] == [{"row": 1}]  # written before the next row
        yield {"row": "a|b"}
        raise RuntimeError("no GPU here")

    def fine(left):
        yield {"seconds": 0.5}

    check = new_check(tmp_path)
    gpu_check.run_parts(check, [("runs", on_disk_then_fail), ("jobs", fine)], {"runs": 0.5, "jobs": 0.5})
    parts = saved(tmp_path)["parts"]
    assert parts["runs"]["status"] == "error" and parts["runs"]["error"] == "RuntimeError: no GPU here"
    assert parts["runs"]["rows"] == [{"row": 1}, {"row": "a|b"}]
    assert parts["jobs"]["status"] == "done" and parts["jobs"]["rows"] == [{"seconds": 0.5}]
    text = (tmp_path / "check.md").read_text()
    assert "## runs (CPU only (x86_64), 2 CPU cores; torch 2.x, transformers 5.x, fairseq 0.12)" in text
    assert "error in 0 s (of 50 s allowed): RuntimeError: no GPU here" in text
    assert "| a\\|b |" in text and "| 0.5 |" in text


def test_a_part_gets_its_share_of_the_time_left_and_none_once_it_is_spent(tmp_path):
    allowed = []

    def quick(left):
        allowed.append(left())
        yield {}

    check = new_check(tmp_path, budget=90.0)
    gpu_check.run_parts(check, [("runs", quick), ("matrix", quick), ("jobs", quick)],
                        {"runs": 2 / 3, "matrix": 1 / 6, "jobs": 1 / 6})
    # 90 x 2/3, then what the first left unspent: half of the rest each (to within the seconds spent here)
    assert allowed == pytest.approx([60.0, 45.0, 90.0], abs=1.0)
    spent = new_check(tmp_path, budget=0.5)
    gpu_check.run_parts(spent, [("runs", quick)], {"runs": 1.0})
    assert saved(tmp_path)["parts"]["runs"] == {"status": "skipped", "note": "the budget is spent", "rows": []}


def test_a_run_past_its_time_is_stopped_with_its_children(tmp_path):
    child = tmp_path / "child.pid"
    command = [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(['sleep', '60']); "
               f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)"]
    code, seconds = gpu_check.run_command(command, tmp_path / "log", timeout=2)
    assert code is None and 2 <= seconds < 20
    pid = int(child.read_text())
    time.sleep(0.5)
    status = f"/proc/{pid}/status"
    assert not os.path.exists(status) or "State:\tZ" in open(status).read()  # gone, or a zombie awaiting init


def test_a_runs_row_from_its_summary():
    summary = {"device": "cuda", "precision": "fp32", "valid_prompts": 500, "beam": 16,
               "timing": {"training_seconds": 40.0, "epochs_trained": 4, "generation_seconds": 8.0,
                          "score_seconds": 1.5, "overhead_seconds": 2.0},
               "validations": [{"gen_seconds": 1.5, "map": 0.1}, {"gen_seconds": 2.5, "map": 0.2}]}
    row = gpu_check.run_row("hf", "loop", summary, 55.0)
    assert row["validation_share"] == 0.25  # (8 + 2) / 40: scoring ran beside generation
    assert row["gen_per_validation_s"] == [1.5, 2.5] and row["map_last"] == 0.2 and row["command_s"] == 55.0
    assert (row["gen_s"], row["score_s"], row["overhead_s"]) == (8.0, 1.5, 2.0)
    off = gpu_check.run_row("hf", "off", {**summary, "validations": []}, 30.0)
    assert "gen_s" not in off and off["training_s"] == 40.0


def test_bad_options_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_check.main(["--data", str(tmp_path), "--out", str(tmp_path / "gpu")])
    assert stop.value.code == 2 and f"--data {tmp_path}: no STAPLE en_pt data there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--out", str(tmp_path), "--modes", "loop,later"])
    assert "--modes: later is not one of loop, off, async" in capsys.readouterr().err


@pytest.mark.training
def test_the_smoke_check_runs_every_part(staple_dir, tmp_path, monkeypatch):
    pytest.importorskip("sentencepiece")
    pytest.importorskip("fairseq")
    pytest.importorskip("transformers")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "gpu"
    code = gpu_check.main(["--smoke", "--device", "cpu", "--data", str(staple_dir), "--out", str(out),
                           "--modes", "loop", "--work", str(tmp_path / "work")])
    found = json.loads((out / "check.json").read_text())
    assert code == 0, {name: part.get("error") for name, part in found["parts"].items()}
    assert found["machine"]["device"] == "cpu" and found["machine"]["cpu_cores"] == os.cpu_count()
    parts = found["parts"]
    assert list(parts) == list(gpu_check.SHARES) and all(p["status"] == "done" for p in parts.values())
    rows = [row for part in parts.values() for row in part["rows"]]
    assert not [row for row in rows if "error" in row or "skipped" in row or "note" in row]
    runs = {(r["framework"], r["mode"]): r for r in parts["runs"]["rows"]}
    assert set(runs) == {("hf", "loop"), ("fairseq", "loop")}
    for framework in ("hf", "fairseq"):
        loop = runs[framework, "loop"]
        assert loop["device"] == "cpu" and loop["validations"] == loop["epochs"] == 2
        assert 0 < loop["validation_share"] < 1 and loop["score_s"] is not None
        assert (out / "runs" / f"{framework}-loop.summary.json").is_file()
    assert {(r["weights"], r["search"]) for r in parts["matrix"]["rows"]} == {
        (w, s) for w in ("fp32", "bf16", "fp16", "fp32+autocast-bf16") for s in ("auto", "pruning", "transformers")}
    assert [r["asked"] for r in parts["batches"]["rows"]] == ["default", "batch_size 2", "batch_size 8",
                                                              "batch_tokens 64"]
    assert parts["batches"]["rows"][0]["batch_size"] == 32  # the CPU's default
    assert [r["beam"] for r in parts["beams"]["rows"]] == [2, 4]
    assert all(r["gen_s"] > 0 and r["prompts"] == 8 for r in parts["beams"]["rows"])
    assert parts["jobs"]["rows"]
    text = (out / "check.md").read_text()
    assert all(f"## {name} (CPU only" in text for name in gpu_check.SHARES)


def test_the_cost_of_each_mode_over_off():
    rows = [{"framework": f, "mode": m, "training_s": t}
            for f, m, t in (("hf", "loop", 12), ("hf", "off", 10), ("hf", "async", 11), ("fairseq", "loop", 30))]
    assert gpu_check.mode_costs(rows) == ["Training wall time by n-best mode:", "",
                                          "- hf: loop 12.0 s (+20.0% over off), off 10.0 s, async 11.0 s "
                                          "(+10.0% over off)", ""]
    assert gpu_check.mode_costs(rows[3:]) == []  # one mode: nothing to compare


@pytest.mark.training
def test_sigterm_ends_the_check_and_its_run(staple_dir, tmp_path):
    """A wall-clock limit's SIGTERM during a run: the check exits 143 and stops the run's process group."""
    out, work = tmp_path / "gpu", tmp_path / "work"
    check = subprocess.Popen([sys.executable, "-m", "scripts.gpu_check", "--smoke", "--device", "cpu", "--data",
                              str(staple_dir), "--out", str(out), "--work", str(work), "--parts", "runs",
                              "--frameworks", "hf", "--modes", "loop"], cwd=gpu_check.REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = f"/proc/{check.pid}/task/{check.pid}/children"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not open(children).read().split():
        time.sleep(0.2)
    run = int(open(children).read().split()[0])
    check.send_signal(signal.SIGTERM)
    assert check.wait(timeout=60) == 143
    status = f"/proc/{run}/status"
    assert not os.path.exists(status) or "State:\tZ" in open(status).read()
    assert saved(out)["parts"]["runs"]["status"] == "running"  # what was on disk when it stopped


def test_the_matrix_gets_the_runs_batches_explicitly():
    pytest.importorskip("transformers")
    from nbest_eval.hf.evaluator import DEFAULT_CUDA_BATCH_TOKENS

    assert gpu_check.run_batches({"batch_size": 64}, "cuda") == (64, None)  # the recipe's, as the run had
    assert gpu_check.run_batches({"batch_size": None}, "cuda") == (None, DEFAULT_CUDA_BATCH_TOKENS)
    assert gpu_check.run_batches({"batch_size": None}, "cpu") == (32, None)
