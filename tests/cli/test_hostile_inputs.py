"""Hostile input, second pass (issue 17), to any command: no input is ever overwritten, and nothing is
silently misused (the gold as an n-best file, one stream read twice). Each class is a table; every
case ends in a clear error and leaves every file as it was. (The same pass's cases for the Python
API, a string as a list of hypotheses and the like, are in metrics/test_api.py.)"""

import hashlib
import os

import pytest

from nbest_eval import InputError
from nbest_eval.cli import main
from nbest_eval.files.output import all_or_nothing, write_text


def contents(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


GOLD_COPY = "gold-copy.txt:2: this looks like a STAPLE gold file (translation|weight lines), not predictions"
SELECT = ["select", "--from-nbest", "{t}/a.tsv", "{t}/b.tsv", "--gold", "{t}/gold.txt"]
REFUSED = {  # arguments ({t}: the folder) -> what the error says
    "select --save is a named input, --force": (SELECT + ["--save", "{t}/b.tsv", "--force", "--no-cache"],
                                                "b.tsv: --save is also an input"),
    "select --cache is a named input": (SELECT + ["--cache", "{t}/b.tsv"], "b.tsv: --cache is also an input"),
    "select the gold named as a checkpoint": (SELECT[:4] + ["{t}/gold-link.txt"] + SELECT[4:] + ["--no-cache"],
                                              "--gold and CHECKPOINT name the same file"),
    "score the gold as the n-best file": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-link.txt"],
                                          "--gold and --nbest name the same file"),
    "compare the gold among the systems": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                            "{t}/gold.txt"], "--gold and --nbest name the same file"),
    "ablate the gold among the systems": (["ablate", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                           "{t}/gold.txt"], "--gold and --nbest name the same file"),
    "score a copy of the gold": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-copy.txt"], GOLD_COPY),
    "score a copy of the gold as staple": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/gold-copy.txt",
                                            "--format", "staple"], GOLD_COPY),
    "compare a copy of the gold": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                    "{t}/gold-copy.txt"], GOLD_COPY),
    "select a copy of the gold": (SELECT[:4] + ["{t}/gold-copy.txt"] + SELECT[4:] + ["--no-cache"], GOLD_COPY),
    "select --link-best with no best checkpoint": (SELECT + ["--metric", "pref_spearman", "--link-best",
                                                             "{t}/best.tsv", "--no-cache"],
                                                   "--link-best: no checkpoint has a value for --metric pref_spearman"),
}


@pytest.mark.parametrize("argv, message", REFUSED.values(), ids=REFUSED.keys())
def test_inputs_are_never_overwritten_nor_misused(command_dir, capsys, argv, message):
    before = contents(command_dir)
    assert main([a.format(t=command_dir) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert contents(command_dir) == before


def test_gold_and_stdin_stream_are_one_input(command_dir, monkeypatch, capsys):
    """``--gold -`` and ``--nbest /dev/stdin`` read one stream, whatever standard input is."""
    with open(command_dir / "gold.txt", "rb") as stdin:
        monkeypatch.setattr(os, "fstat", lambda fd, real=os.fstat: real(stdin.fileno()) if fd == 0 else real(fd))
        assert main(["score", "--gold", "-", "--nbest", str(command_dir / "gold.txt")]) == 2
    assert "--gold and --nbest both read" in capsys.readouterr().err


def test_an_overwritten_output_comes_back_when_a_later_one_fails(command_dir):
    (command_dir / "out").mkdir()
    write_text(command_dir / "first.txt", "old")
    with pytest.raises(InputError, match="out: cannot write"):
        with all_or_nothing():
            write_text(command_dir / "first.txt", "new", overwrite=True)
            write_text(command_dir / "out", "a directory cannot be replaced by a file", overwrite=True)
    assert (command_dir / "first.txt").read_text() == "old"
    assert sorted(p.name for p in command_dir.iterdir()) == ["a.tsv", "b.tsv", "first.txt", "gold-copy.txt",
                                                             "gold-link.txt", "gold.txt", "out"]
