"""Hostile input, second pass (issue 17), to any command: absurd values, unwritable places and a full
standard output are errors rather than tracebacks. Every command runs in this process but the ones
whose stdout must be real. (The same pass's special files are in selection/test_hostile_select.py, its
format detection and reader messages in formats/test_hostile_formats.py.)"""

import subprocess
import sys

import pytest

from nbest_eval.cli import main

TRACEBACKS = {  # arguments -> message (argparse refusals exit through SystemExit)
    "--max-line-bytes beyond any memory": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                            "--max-line-bytes", "9" * 30], "is too large: at most"),
    "a metric key of 5000 digits": (["score", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv", "--metrics",
                                     "p" + "9" * 5000], "a number of more than 9 digits is out of range"),
    "synth into a path under a file": (["synth", "{t}/gold.txt/corpus"],
                                       "gold.txt/corpus: OUT_DIR: cannot be created"),
    "synth into a folder that cannot be made": (["synth", "/proc/nbest-eval/corpus"], "cannot create this folder"),
    "synth with a training set beyond memory": (["synth", "{t}/c", "--train-pairs", "9" * 15],
                                                "at most 10000000 training pairs"),
    "compare: a --scatter measure not scored": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                                 "{t}/gold.txt.tsv", "--metrics", "p1", "--scatter", "map,wf1",
                                                 "{t}/s.png"], "--scatter: wf1 is not scored"),
    "compare: an unknown --reference": (["compare", "--gold", "{t}/gold.txt", "--nbest", "{t}/a.tsv",
                                         "{t}/gold.txt.tsv", "--reference", "mapp"], "--reference: unknown metric"),
}


@pytest.mark.parametrize("argv, message", TRACEBACKS.values(), ids=TRACEBACKS.keys())
def test_absurd_values_and_unwritable_places_are_errors(command_dir, capsys, argv, message):
    (command_dir / "gold.txt.tsv").write_text("p1\t1\t-1\toi\n")  # compare's second system (never read: refused first)
    try:
        status = main([a.format(t=command_dir) for a in argv])
    except SystemExit as exit:
        status = exit.code
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err, err
    assert not (command_dir / "c").exists() and not (command_dir / "s.png").exists()


@pytest.mark.parametrize("command", [["score", "--metrics", "map"], ["score", "--json"],
                                     ["convert", "--to", "tsv", "-"]])
def test_a_full_standard_output_is_an_error(command_dir, command):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nbest_eval", command[0], "--gold",
                                 str(command_dir / "gold.txt"), "--nbest", str(command_dir / "a.tsv"), *command[1:]],
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().endswith("error: standard output: cannot write: No space left on device"), \
        result.stderr
