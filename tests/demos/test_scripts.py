"""The scripts' two spellings: ``python -m scripts.NAME`` from the repository root, and the old
``python scripts/NAME.py`` from anywhere (kept for one release), each reaching its command in
:mod:`experiments` without an install of it or a ``sys.path`` edit."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.stem for p in (REPO / "scripts").glob("[!_]*.py"))
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_every_script_is_listed():
    assert SCRIPTS == ["bench", "gpu_check", "hf_ablation", "replay_stopping", "staple_en_pt", "train_hf"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_python_dash_m_from_the_root(name):
    result = subprocess.run([sys.executable, "-m", f"scripts.{name}", "--help"], cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:") and not result.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_old_spelling_runs_from_another_folder_and_says_it_goes(name, tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "scripts" / f"{name}.py"), "--help"], cwd=tmp_path,
                            env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:")
    assert f"run `python -m scripts.{name}` from the repository root" in result.stderr


def test_the_old_spelling_keeps_the_working_directory_and_the_arguments(tmp_path):
    """A relative path means what it meant: the list, found in the working directory, passes; the
    missing gold is named as given."""
    (tmp_path / "epoch1.tsv").write_text("")
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_stopping.py"), "--gold", "no-gold.txt",
                             "epoch1.tsv"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("replay_stopping.py: error: no-gold.txt: cannot read")
