"""Fixtures shared by the test folders; the data they are built from is in cases.py. Each name has
one meaning across the suite: no two test files define a fixture of the same name
(tests/package/test_fixtures.py checks it)."""

import os
from pathlib import Path

import pytest
from cases import SYNTH_CORPUS, THREE_PROMPT_GOLD, TWO_PROMPT_GOLD

from nbest_eval import Gold
from nbest_eval.analysis.synth import generate, write_corpus
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


@pytest.fixture(scope="session")
def en_pt_gold(staple_dir) -> Gold:
    """The real STAPLE en_pt dev gold (500 prompts), read once; tests must not change it."""
    return read_gold(staple_dir / "dev.en_pt.2020-02-20.gold.txt")


@pytest.fixture(scope="session")
def synth():
    """The synthetic corpus of cases.SYNTH_CORPUS, generated once; tests must not change it."""
    return generate(**SYNTH_CORPUS)


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    """A small synthetic corpus (4000 training pairs, 40 valid prompts and their gold, seed 1), made
    once: what the Hugging Face training tests train and validate on. Tests must not change it."""
    path = tmp_path_factory.mktemp("hf") / "synth"
    write_corpus(path, generate(1, 4000, 40))
    return path


@pytest.fixture
def obstacle_dir(tmp_path) -> Path:
    """A folder with what no output folder can be made at: a file (``a-file``) and a dangling link
    (``dangling``), for the adapters' save_dir checks."""
    (tmp_path / "a-file").write_text("mine\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return tmp_path


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


@pytest.fixture
def command_dir(tmp_path) -> Path:
    """A folder to run commands in: ``gold.txt`` (cases.TWO_PROMPT_GOLD) under two other names,
    ``gold-copy.txt`` (another file with the same text) and ``gold-link.txt`` (a hard link: the same
    file), and two systems' n-best lists for it, ``a.tsv`` (p1 olá, p2 tchau: MAP 0.75) and ``b.tsv``.
    Its gold.txt is not gold_file's: a test takes one or the other."""
    (tmp_path / "gold.txt").write_text(TWO_PROMPT_GOLD)
    (tmp_path / "gold-copy.txt").write_text(TWO_PROMPT_GOLD)
    os.link(tmp_path / "gold.txt", tmp_path / "gold-link.txt")
    (tmp_path / "a.tsv").write_text("p1\t1\t-1\tolá\np2\t1\t-1\ttchau\n")
    (tmp_path / "b.tsv").write_text("p1\t1\t-1\toi\np2\t1\t-1\tx\n")
    return tmp_path


@pytest.fixture(scope="session")
def fairseq_corpus(tmp_path_factory):
    """The corpus the fairseq tests train on (:func:`fairseq_runs.make_corpus`), binarized once."""
    from fairseq_runs import make_corpus

    return make_corpus(tmp_path_factory.mktemp("fairseq_plugin"))
