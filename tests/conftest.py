"""Fixtures shared by the test modules."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def staple_dir() -> Path:
    """The real STAPLE en_pt sample: $NBEST_EVAL_STAPLE_DIR, else ../shared/data/staple/en_pt from the
    repository root. Tests that need it skip when it is absent (it is not part of the repository)."""
    path = Path(os.environ.get("NBEST_EVAL_STAPLE_DIR", REPO.parent / "shared" / "data" / "staple" / "en_pt"))
    if not path.is_dir():
        pytest.skip(f"no STAPLE data at {path} (set NBEST_EVAL_STAPLE_DIR)")
    return path
