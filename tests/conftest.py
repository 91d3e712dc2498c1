"""Fixtures shared by the test folders; the data they are built from is in cases.py. Each name has
one meaning across the suite: a test module never defines a fixture of the same name."""

import os
from pathlib import Path

import pytest
from cases import THREE_PROMPT_GOLD

from nbest_eval import Gold
from nbest_eval.formats import read_gold

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def staple_dir() -> Path:
    """The real STAPLE en_pt sample: $NBEST_EVAL_STAPLE_DIR, else ../shared/data/staple/en_pt from the
    repository root. Tests that need it skip when it is absent (it is not part of the repository)."""
    path = Path(os.environ.get("NBEST_EVAL_STAPLE_DIR", REPO.parent / "shared" / "data" / "staple" / "en_pt"))
    if not path.is_dir():
        pytest.skip(f"no STAPLE data at {path} (set NBEST_EVAL_STAPLE_DIR)")
    return path


@pytest.fixture
def gold_file(tmp_path) -> Path:
    """cases.THREE_PROMPT_GOLD written as ``gold.txt`` in the test's tmp_path."""
    path = tmp_path / "gold.txt"
    path.write_text(THREE_PROMPT_GOLD, encoding="utf-8")
    return path


@pytest.fixture
def gold(gold_file) -> Gold:
    """cases.THREE_PROMPT_GOLD as read from ``gold_file``: the gold the readers and writers are tested on."""
    return read_gold(gold_file)
