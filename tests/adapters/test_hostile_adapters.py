"""Hostile input, second pass (issue 17), to the training adapters, without training: what the HF
callback and the fairseq task would write into, and a Hugging Face checkpoint without its tokenizer.
Each is refused when the run is set up, with an error naming the option and the path, and nothing
is written. Each class is a table."""

import os
from types import SimpleNamespace

import pytest

from nbest_eval.cli import main
from nbest_eval.data import Gold, GoldPrompt, InputError
from nbest_eval.formats import read_gold, write_gold

GOLD = Gold([GoldPrompt("p1", "hi", (("olá", 1.0),)), GoldPrompt("p2", "bye", (("tchau", 1.0),))])


@pytest.fixture
def obstacle_dir(tmp_path):
    """A folder with GOLD as gold.txt and what no save_dir can be made at: a file (a-file) and a
    dangling link (dangling)."""
    write_gold(GOLD, tmp_path / "gold.txt")
    (tmp_path / "a-file").write_text("mine\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return tmp_path


def listing(root):
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


# -- NBestEvalCallback: name and save_dir are checked when it is made, not at the first evaluation -------------

NOT_PLAIN = "is not a plain name"
CALLBACK_REFUSED = {  # NBestEvalCallback arguments ({t}: the folder) -> what the error says
    "name reaching up": ({"name": "../up", "save_dir": "{t}/out"}, NOT_PLAIN),
    "name with a folder": ({"name": "a/b", "save_dir": "{t}/out"}, NOT_PLAIN),
    "absolute name": ({"name": "/tmp/x", "save_dir": "{t}/out"}, NOT_PLAIN),
    "hidden name": ({"name": ".hidden"}, NOT_PLAIN),
    "empty name": ({"name": ""}, NOT_PLAIN),
    "name with a space": ({"name": "my run"}, NOT_PLAIN),
    "save_dir is a file": ({"save_dir": "{t}/a-file"}, "{t}/a-file: save_dir: exists and is not a folder"),
    "save_dir under a file": ({"save_dir": "{t}/a-file/runs"},
                              "{t}/a-file/runs: save_dir: cannot be created: {t}/a-file is not a folder"),
    "save_dir a dangling link": ({"save_dir": "{t}/dangling/runs"},
                                 "cannot be created: {t}/dangling is not a folder"),
}


@pytest.fixture(scope="module")
def callback_class():
    pytest.importorskip("transformers")
    return pytest.importorskip("nbest_eval.hf").NBestEvalCallback


@pytest.mark.parametrize("options, message", CALLBACK_REFUSED.values(), ids=CALLBACK_REFUSED.keys())
def test_callback_refuses_names_and_save_dirs_when_made(callback_class, obstacle_dir, options, message):
    before = listing(obstacle_dir)
    with pytest.raises(InputError) as info:
        callback_class(obstacle_dir / "gold.txt", **{k: v.format(t=obstacle_dir) for k, v in options.items()})
    assert message.format(t=obstacle_dir) in str(info.value)
    assert listing(obstacle_dir) == before


def test_callback_takes_a_save_dir_still_to_make(callback_class, obstacle_dir):
    callback = callback_class(obstacle_dir / "gold.txt", name="staple-v2.1", save_dir=obstacle_dir / "runs" / "nbest")
    assert callback.save_dir == obstacle_dir / "runs" / "nbest"
    assert not (obstacle_dir / "runs").exists()  # made when it saves


# -- select --hf: a checkpoint directory without tokenizer files ------------------------------------------------

@pytest.fixture(scope="module")
def no_tokenizer(tmp_path_factory):
    """A tiny T5 checkpoint directory as save_pretrained writes the model alone (no tokenizer files),
    and a directory with the tokenizer only."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    import hf_toy

    root = tmp_path_factory.mktemp("hf_no_tokenizer")
    tokenizer = hf_toy.build_tokenizer(["hi bye olá tchau"])
    hf_toy.build_model(tokenizer, d_model=16, layers=1, heads=2, ffn=32).save_pretrained(root / "checkpoint-1")
    (root / "empty").mkdir()
    write_gold(GOLD, root / "gold.txt")
    return root


TOKENIZER_REFUSED = {  # extra select arguments ({r}: the folder) -> the directory the error names
    "its own": ([], "{r}/checkpoint-1"),
    "--tokenizer without one": (["--tokenizer", "{r}/empty"], "{r}/empty"),
}


@pytest.mark.parametrize("extra, where", TOKENIZER_REFUSED.values(), ids=TOKENIZER_REFUSED.keys())
def test_select_hf_names_missing_tokenizer_files(no_tokenizer, capsys, extra, where):
    before = listing(no_tokenizer)
    # every generation setting given: the checkpoint records none (it has no nbest_eval.json)
    argv = ["select", "--hf", "{r}/checkpoint-1", "--gold", "{r}/gold.txt", "--beam", "2", "--max-len-a", "0",
            "--max-len-b", "8", "--lenpen", "1", *extra]
    assert main([a.format(r=no_tokenizer) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{where.format(r=no_tokenizer)}: no tokenizer files (none of tokenizer.json, " in err, err
    assert "blank tokenizer" in err and "Traceback" not in err, err
    assert listing(no_tokenizer) == before  # no cache, no output


# -- the fairseq task's --nbest-save-dir: made with make_folder, refused on every rank ----------------------------

@pytest.fixture(scope="module")
def task_class():
    pytest.importorskip("fairseq")
    from nbest_eval.fairseq.task import NBestConfigError, TranslationNBestTask

    return TranslationNBestTask, NBestConfigError


def prepared(task_class, save_dir):
    """The task's save-dir set-up as load_dataset runs it, on a task with just what it reads."""
    task = task_class.__new__(task_class)
    task.cfg, task.nbest_subset = SimpleNamespace(nbest_save_dir=str(save_dir)), "valid"
    task.plan = SimpleNamespace(gold=GOLD)
    task._prepare_save_dir()


SAVE_DIR_REFUSED = {  # --nbest-save-dir ({t}: the folder) -> what the error says
    "a file": ("{t}/a-file", "{t}/a-file: --nbest-save-dir: exists and is not a folder"),
    "under a file": ("{t}/a-file/nbest", "--nbest-save-dir: cannot be created: {t}/a-file is not a folder"),
    "a dangling link": ("{t}/dangling", "{t}/dangling: --nbest-save-dir: exists and is not a folder"),
}


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("save_dir, message", SAVE_DIR_REFUSED.values(), ids=SAVE_DIR_REFUSED.keys())
def test_fairseq_save_dir_that_cannot_be_made_stops_every_rank(task_class, obstacle_dir, monkeypatch, save_dir, message,
                                                               rank):
    from fairseq.distributed import utils as distributed_utils

    task, error = task_class
    monkeypatch.setattr(distributed_utils, "get_global_rank", lambda: rank)
    before = listing(obstacle_dir)
    with pytest.raises(error) as info:
        prepared(task, save_dir.format(t=obstacle_dir))
    assert str(info.value).startswith("translation_nbest: ") and message.format(t=obstacle_dir) in str(info.value)
    assert listing(obstacle_dir) == before


def test_fairseq_save_dir_is_made_with_its_parents(task_class, obstacle_dir):
    prepared(task_class[0], obstacle_dir / "runs" / "nbest")
    assert os.listdir(obstacle_dir / "runs" / "nbest") == ["valid.gold.txt"]
    written = read_gold(str(obstacle_dir / "runs" / "nbest" / "valid.gold.txt"))
    assert [(p.id, p.text, p.translations) for p in written] == [(p.id, p.text, p.translations) for p in GOLD]
