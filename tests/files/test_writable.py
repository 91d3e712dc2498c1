"""May this path be written (nbest_eval.files.writable): every rule as a table of cases, each checked twice,
as the library says it (the path, the role, what is wrong, no command-line option) and as the command
line prints it (the option it gives as the role, and what --force would change)."""

import os
import re

import pytest

from nbest_eval.cli import error_message, main
from nbest_eval.files.output import write_text
from nbest_eval.files.writable import (
    Refused,
    check_can_make_folder,
    check_empty_folder,
    check_link,
    check_model_directory,
    check_outputs,
)

#: a command-line option in a message (paths of the tests hold no " --")
OPTION = re.compile(r"(^|\s)--[a-z]")


@pytest.fixture
def path_kinds(tmp_path):
    """An input file (also reached by a symlink and a hard link), a file and a folder of the user's,
    an empty folder, a checkpoint folder (an input of model directories), a model directory, a link
    to it and a dangling link."""
    (tmp_path / "input.txt").write_text("input")
    (tmp_path / "input-link.txt").symlink_to(tmp_path / "input.txt")
    os.link(tmp_path / "input.txt", tmp_path / "input-hard-link.txt")
    (tmp_path / "mine.txt").write_text("mine")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    (tmp_path / "run" / "checkpoint-1").mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "model-link").symlink_to(tmp_path / "model")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return tmp_path


def file_output(path_kinds, role, path, overwrite):
    check_outputs({role: path}, [path_kinds / "input.txt"], overwrite)


def file_output_of_a_linked_input(path_kinds, role, path, overwrite):
    check_outputs({role: path}, [path_kinds / "input-link.txt"], overwrite)


def two_file_outputs(path_kinds, role, path, overwrite):
    check_outputs({"the table": path, role: path}, [], overwrite)


def model_directory(path_kinds, role, path, overwrite):
    check_model_directory(role, path, [path_kinds / "run" / "checkpoint-1"], overwrite)


def model_directory_of_a_run_with_a_table(path_kinds, role, path, overwrite):
    check_model_directory(role, path, [], overwrite, {"the table": path_kinds / "model" / "table.json"})


CHECKS = {  # kind of output -> check(path_kinds, role, path, overwrite)
    "file": file_output,
    "file (input named by a link)": file_output_of_a_linked_input,
    "two files": two_file_outputs,
    "model directory": model_directory,
    "model directory (with a table)": model_directory_of_a_run_with_a_table,
    "link": lambda path_kinds, role, path, overwrite: check_link(role, path, overwrite),
    "folder": lambda path_kinds, role, path, overwrite: check_can_make_folder(role, path),
    "folder written into": lambda path_kinds, role, path, overwrite: check_empty_folder(role, path, overwrite),
}
EXISTS = "already exists; refusing to overwrite it with {role}"
INPUT = "{role} is an input, inside one or holds one ({t}/run/checkpoint-1); refusing to write there"
NOT_A_LINK = "{role}: exists and is not a link; refusing to replace it"
NOT_A_FOLDER = "{role}: exists and is not a folder"
NOT_A_MODEL = "{role}: exists and is not a model directory (no config.json); refusing to replace it"
CASES = {  # name -> (kind, path, overwrite, what the refusal says or None, whether overwriting lifts it)
    "file: new": ("file", "{t}/new.txt", False, None, None),
    "file: exists": ("file", "{t}/mine.txt", False, EXISTS, True),
    "file: exists, overwrite": ("file", "{t}/mine.txt", True, None, None),
    "file: a dangling link": ("file", "{t}/dangling", False, EXISTS, True),
    "file: a link to an input": ("file", "{t}/input-link.txt", False, EXISTS, True),
    "file: a link to an input, overwrite (the link is replaced)": ("file", "{t}/input-link.txt", True, None, None),
    "file: an input, overwrite": ("file", "{t}/input.txt", True, "{role} is also an input; refusing to overwrite it",
                                  False),
    "file: a hard link to an input, overwrite": ("file", "{t}/input-hard-link.txt", True, "{role} is also an input",
                                                 False),
    "file: what an input link names, overwrite": ("file (input named by a link)", "{t}/input.txt", True,
                                                  "{role} is also an input", False),
    "file: a folder, overwrite": ("file", "{t}/folder", True, "{role}: is a directory; give a file name", None),
    "file: a device, overwrite": ("file", "/dev/null", True, "{role}: is not a regular file (a device or a pipe)",
                                  None),
    "file: parent missing": ("file", "{t}/missing/new.txt", False, "{role}: its folder {t}/missing does not exist",
                             None),
    "file: parent a file": ("file", "{t}/mine.txt/new.txt", False, "{role}: its folder {t}/mine.txt does not exist",
                            None),
    "two files: one file": ("two files", "{t}/new.txt", True, "{role} and the table name the same file", None),
    "model directory: new": ("model directory", "{t}/average", False, None, None),
    "model directory: an input": ("model directory", "{t}/run/checkpoint-1", True, INPUT, False),
    "model directory: inside an input": ("model directory", "{t}/run/checkpoint-1/average", True, INPUT, False),
    "model directory: holds an input": ("model directory", "{t}/run", True, INPUT, False),
    "model directory: holds another output": ("model directory (with a table)", "{t}/model", True,
                                              "{role} would replace the table's file {t}/model/table.json", False),
    "model directory: exists": ("model directory", "{t}/model", False, EXISTS, True),
    "model directory: exists, overwrite": ("model directory", "{t}/model", True, None, None),
    "model directory: a folder of the user's, overwrite": ("model directory", "{t}/folder", True, NOT_A_MODEL, False),
    "model directory: a link to one, overwrite": ("model directory", "{t}/model-link", True, NOT_A_MODEL, False),
    "model directory: parent missing": ("model directory", "{t}/missing/average", False,
                                        "{role}: its folder {t}/missing does not exist", None),
    "link: new": ("link", "{t}/best", False, None, None),
    "link: a link": ("link", "{t}/input-link.txt", False, EXISTS, True),
    "link: a link, overwrite": ("link", "{t}/input-link.txt", True, None, None),
    "link: a dangling link, overwrite": ("link", "{t}/dangling", True, None, None),
    "link: a file, overwrite": ("link", "{t}/mine.txt", True, NOT_A_LINK, False),
    "link: a folder, overwrite": ("link", "{t}/folder", True, NOT_A_LINK, False),
    "folder: new, with its parents": ("folder", "{t}/a/b/c", False, None, None),
    "folder: exists": ("folder", "{t}/folder", False, None, None),
    "folder: a file": ("folder", "{t}/mine.txt", False, NOT_A_FOLDER, None),
    "folder: a dangling link": ("folder", "{t}/dangling", False, NOT_A_FOLDER, None),
    "folder: under a file": ("folder", "{t}/mine.txt/sub", False, "{role}: cannot be created: {t}/mine.txt is not a "
                                                                   "folder", None),
    "folder written into: empty": ("folder written into", "{t}/empty", False, None, None),
    "folder written into: new": ("folder written into", "{t}/new", False, None, None),
    "folder written into: holds files": ("folder written into", "{t}/folder", False,
                                         "{role}: is not empty; refusing to write into it", True),
    "folder written into: holds files, overwrite": ("folder written into", "{t}/folder", True, None, None),
    "folder written into: a file, overwrite": ("folder written into", "{t}/mine.txt", True, NOT_A_FOLDER, None),
}
REFUSALS = {name: case for name, case in CASES.items() if case[3] is not None}


def run_check(path_kinds, kind, path, overwrite, role):
    CHECKS[kind](path_kinds, role, path.format(t=path_kinds), overwrite)


@pytest.mark.parametrize("kind, path, overwrite, reason, lifts", CASES.values(), ids=CASES.keys())
def test_the_library_says_what_is_wrong_with_which_path_and_names_no_option(path_kinds, kind, path, overwrite, reason,
                                                                             lifts):
    before = sorted(os.listdir(path_kinds))
    if reason is None:
        run_check(path_kinds, kind, path, overwrite, "the output")
        assert sorted(os.listdir(path_kinds)) == before  # a check makes nothing
        return
    with pytest.raises(Refused) as refused:
        run_check(path_kinds, kind, path, overwrite, "the output")
    message = str(refused.value)
    assert message.startswith(path.format(t=path_kinds) + ": "), message
    assert reason.format(role="the output", t=path_kinds) in message, message
    assert refused.value.overwrite_lifts is lifts
    assert message.endswith(", even if asked to") is (lifts is False), message
    assert not OPTION.search(message), message
    assert sorted(os.listdir(path_kinds)) == before


@pytest.mark.parametrize("kind, path, overwrite, reason, lifts", REFUSALS.values(), ids=REFUSALS.keys())
def test_the_command_line_names_its_option_and_what_force_would_change(path_kinds, kind, path, overwrite, reason,
                                                                       lifts):
    with pytest.raises(Refused) as refused:
        run_check(path_kinds, kind, path, overwrite, "--out")
    message = error_message(refused.value)
    assert message.startswith(path.format(t=path_kinds) + ": ") and "--out" in message, message
    assert reason.format(role="--out", t=path_kinds) in message, message
    hint = {True: " (use --force)", False: ", even with --force", None: None}[lifts]
    assert message.endswith(hint) if hint else "--force" not in message, message


def test_a_link_output_is_replaced_never_written_through(path_kinds):
    link = path_kinds / "input-link.txt"
    file_output(path_kinds, "the output", link, True)
    write_text(link, "new", overwrite=True)
    assert not link.is_symlink() and link.read_text() == "new"
    assert (path_kinds / "input.txt").read_text() == "input"


GOLD = "p1|hi\nolá|1.0\n"
COMMANDS = {  # arguments ({t}: the path_kinds folder) -> what the command prints after the path (nothing is written)
    "score: --per-prompt exists": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/n.tsv", "--per-prompt",
                                    "{t}/mine.txt"],
                                   "{t}/mine.txt: already exists; refusing to overwrite it with --per-prompt "
                                   "(use --force)"),
    "synth: OUT_DIR holds files": (["synth", "--train-pairs", "5", "--valid-prompts", "1", "{t}/folder"],
                                   "{t}/folder: OUT_DIR: is not empty; refusing to write into it (use --force)"),
    "select: --link-best is a file": (["select", "--from-nbest", "{t}/n.tsv", "--gold", "{t}/gold.txt", "--no-cache",
                                       "--link-best", "{t}/mine.txt", "--force"],
                                      "{t}/mine.txt: --link-best: exists and is not a link; refusing to replace it, "
                                      "even with --force"),
}


@pytest.mark.parametrize("argv, message", COMMANDS.values(), ids=COMMANDS.keys())
def test_commands_print_the_refusal_with_their_options(path_kinds, capsys, argv, message):
    (path_kinds / "gold.txt").write_text(GOLD)
    (path_kinds / "n.tsv").write_text("p1\t1\t-1\tolá\n")
    before = {path: path.read_bytes() for path in path_kinds.rglob("*") if path.is_file()}
    assert main([arg.format(t=path_kinds) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f": error: {message.format(t=path_kinds)}\n"), err
    assert {path: path.read_bytes() for path in path_kinds.rglob("*") if path.is_file()} == before
