"""scripts.gpu_check (experiments/gpu_check.py): a part that fails or runs out of time does not stop the
check, results are on disk after every row, a run past its time is stopped with its children, and the
whole check at toy size on the CPU writes every part's rows (the run skips without the STAPLE data)."""

import json
import os
import shutil
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
    recorded = json.loads((out / "runs" / "hf-loop.summary.json").read_text())
    assert recorded["device"] == "cpu"  # so the run validated with its recipe's prompts a batch
    from experiments.staple.hf_run import recipe_settings

    eval_batch = recipe_settings(recorded.get("hf_recipe", "t5"))["eval_batch_size"]
    assert all(r["batch_size"] == eval_batch for r in parts["beams"]["rows"])  # the run's batches, not the CPU's 32
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


def fake_data(tmp_path):
    """A --data folder that passes the option's check (the dev gold's name; no run reads it here)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / gpu_check.DEV_GOLD).write_text("")
    return data


def test_a_run_whose_command_fails_is_an_error_row_and_the_check_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "staple_command", lambda ctx, framework, mode, out: [
        sys.executable, "-c", "import sys; print('staple_en_pt.py: error: no such thing'); sys.exit(2)"])
    out, work = tmp_path / "gpu", tmp_path / "work"
    code = gpu_check.main(["--smoke", "--device", "cpu", "--data", str(fake_data(tmp_path)), "--out", str(out),
                           "--parts", "runs,beams", "--modes", "loop", "--frameworks", "hf", "--work", str(work)])
    parts = saved(out)["parts"]
    assert code == 1 and parts["runs"]["status"] == "error" and parts["runs"]["error"] == "1 of 1 rows failed"
    [row] = parts["runs"]["rows"]
    assert set(row) == {"framework", "mode", "command_s", "error"}  # no figures: the run has none
    assert row["error"].startswith("exit status 2; log: runs/hf-loop.log.txt: ") and "no such thing" in row["error"]
    beams = parts["beams"]  # no checkpoint from the failed run: a one-line error, no traceback
    assert beams["status"] == "error" and "traceback" not in beams and beams["rows"] == []
    assert beams["error"].startswith("NoRun: no finished HF loop run")
    assert "failed: runs, beams" in capsys.readouterr().out


def test_a_work_folder_holding_an_earlier_check_is_refused(tmp_path, capsys):
    work = tmp_path / "work"
    (work / "hf-loop").mkdir(parents=True)
    with pytest.raises(SystemExit) as stop:
        gpu_check.main(["--data", str(fake_data(tmp_path)), "--out", str(tmp_path / "gpu"), "--work", str(work),
                        "--parts", "runs"])
    assert stop.value.code == 2
    assert f"--work {work}: exists and is not an empty folder" in capsys.readouterr().err
    assert not (tmp_path / "gpu").exists()  # refused before anything was written
    shutil.rmtree(work / "hf-loop")
    assert gpu_check.parse_args(["--data", str(tmp_path / "data"), "--out", str(tmp_path), "--work",
                                 str(work)]).work == work  # an empty one is used


def test_the_generating_parts_need_the_hf_loop_run_in_the_same_call(tmp_path, capsys):
    data = fake_data(tmp_path)
    for given in (["--parts", "matrix,batches"], ["--parts", "runs,beams", "--modes", "off"],
                  ["--parts", "runs,beams", "--frameworks", "fairseq"]):
        with pytest.raises(SystemExit):
            gpu_check.parse_args(["--data", str(data), "--out", str(tmp_path), *given])
        assert "need the HF loop run of this call" in capsys.readouterr().err
    args = gpu_check.parse_args(["--data", str(data), "--out", str(tmp_path), "--parts", "beams,runs,runs"])
    assert args.parts == ("runs", "beams")  # the running order, once each


def test_the_machine_names_the_package_version_and_a_dirty_tree(tmp_path, monkeypatch):
    import nbest_eval

    assert gpu_check.machine("cpu")["nbest_eval"] == nbest_eval.__version__  # not install metadata
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setattr(gpu_check, "REPO", tmp_path)
    clean = gpu_check.commit()
    assert len(clean) >= 7 and head.startswith(clean)
    (tmp_path / "a.txt").write_text("two\n")  # the tree no longer what HEAD says
    assert gpu_check.commit() == clean + "-dirty"


def test_generation_keeps_the_runs_batch_size_unless_a_row_asks_otherwise(monkeypatch):
    pytest.importorskip("transformers")
    from nbest_eval.hf import evaluator as hf_evaluator

    monkeypatch.setattr(hf_evaluator, "NBestEvaluator", lambda gold, tokenizer, prompts, **given: given)
    ctx = gpu_check.Context(None, "cpu", gpu_check.SMOKE, ("hf",), ("loop",), None, None)
    ctx._hf = gpu_check.HFModel(None, None, "gold", "prompts", "checkpoint", {
        "batch_size": 64, "max_len_a": 1.5, "max_len_b": 10, "generation_kwargs": {}})
    assert gpu_check.evaluator(ctx, num_beams=2, num_return_sequences=2)["batch_size"] == 64
    assert gpu_check.evaluator(ctx, batch_size=8)["batch_size"] == 8
