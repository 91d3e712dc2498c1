"""examples/: programs a user can copy. Each imports only nbest_eval, the frameworks and the standard
library (nothing of experiments/ or tests/), and the Hugging Face one trains and validates."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
ALLOWED = {"nbest_eval", "torch", "transformers", "tokenizers", "fairseq"} | set(sys.stdlib_module_names)


def imported(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_imports_only_nbest_eval_the_frameworks_and_the_standard_library(path):
    assert imported(path) <= ALLOWED, imported(path) - ALLOWED
    assert "sys.path" not in path.read_text(encoding="utf-8")


def test_the_import_check_sees_a_forbidden_import(tmp_path):
    (tmp_path / "x.py").write_text("import os\nfrom experiments import hf_toy\nfrom . import y\n")
    assert imported(tmp_path / "x.py") - ALLOWED == {"experiments"}


@pytest.mark.training
def test_the_hf_demo_trains_and_its_saved_lists_rescore_to_its_logged_map(tmp_path):
    pytest.importorskip("transformers")
    from nbest_eval import score
    from nbest_eval.formats import read_gold

    out = tmp_path / "run"
    result = subprocess.run([sys.executable, str(REPO / "examples" / "hf_demo.py"), "--out", str(out),
                             "--steps", "40", "--eval-steps", "20", "--train-pairs", "2000", "--valid-prompts", "16"],
                            cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[-3:-1]] == ["step    20", "step    40"]
    assert lines[-1].startswith("best MAP ")
    state = json.loads((out / "checkpoints" / "checkpoint-40" / "trainer_state.json").read_text())
    logged = {e["step"]: e["eval_map"] for e in state["log_history"] if "eval_map" in e}
    gold = read_gold(out / "data" / "valid.gold.txt")
    for step, value in logged.items():
        saved = next((out / "nbest").glob(f"*step{step}.*"))
        assert score(gold, saved, metrics=["map"]).values["map"] == pytest.approx(value, abs=1e-9)
    assert f"best MAP {max(logged.values()):.4f}" in lines[-1]

    again = subprocess.run([sys.executable, str(REPO / "examples" / "hf_demo.py"), "--out", str(out)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "usage:" in again.stderr and str(out / "data") in again.stderr
