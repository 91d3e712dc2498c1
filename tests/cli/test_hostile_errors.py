"""Hostile input, second pass (issue 17): special files never hang a command, absurd values and
broken outputs are errors rather than tracebacks, and messages name the real cause. One table per
class; every command runs in this process but the ones whose stdout or stdin must be real."""

import io
import os
import subprocess
import sys
import threading

import pytest
from cases import TWO_PROMPT_GOLD

from nbest_eval import InputError
from nbest_eval.analysis.agreement import agreement
from nbest_eval.cli import main
from nbest_eval.formats import LineSource, detect_format, read_gold
from nbest_eval.formats.common import MAX_LINE_BYTES


def fifo(tmp):
    os.mkfifo(tmp / "n.fifo")
    return tmp / "n.fifo"


def zero_in_checkpoint(tmp):
    (tmp / "checkpoint-1").mkdir()
    (tmp / "checkpoint-1" / "config.json").write_text("{}")
    (tmp / "checkpoint-1" / "model.safetensors").symlink_to("/dev/zero")
    return tmp / "checkpoint-1" / "model.safetensors"


SPECIAL = {  # select's inputs -> the file named in the error
    "a FIFO with no writer": lambda tmp: (["--from-nbest", tmp / "a.tsv", fifo(tmp)], tmp / "n.fifo"),
    "/dev/zero": lambda tmp: (["--from-nbest", tmp / "a.tsv", "/dev/zero"], "/dev/zero"),
    "a link to /dev/zero in an HF checkpoint": lambda tmp: (["--hf", zero_in_checkpoint(tmp).parent],
                                                            tmp / "checkpoint-1" / "model.safetensors"),
}


@pytest.mark.parametrize("make", SPECIAL.values(), ids=SPECIAL.keys())
def test_select_refuses_special_files_at_once(command_dir, make):
    inputs, named = make(command_dir)
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "select", *map(str, inputs), "--gold",
                             str(command_dir / "gold.txt"), "--no-cache"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{named}: not a regular file (a pipe, a FIFO or a device)" in result.stderr, result.stderr


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


def source(data: bytes, limit=MAX_LINE_BYTES):
    return LineSource(io.BytesIO(data), "in", limit)


FAIRSEQ_LOG = "".join(f"2024-01-01 12:00:{i % 60:02} | INFO | fairseq_cli.generate | line {i}\n" for i in range(300))
DETECTED = {  # first lines -> the format detected (the reader then names the real trouble)
    "Moses without spaces around |||": ("0|||olá|||F0= -1|||-1\n", "moses"),
    "fairseq output after 300 log lines": (FAIRSEQ_LOG + "S-0\thi\nH-0\t-1\tolá\n", "fairseq"),
    "hydra-style log lines first": ("[2024-01-01 12:00:00,000][fairseq.tasks][INFO] - x\nH-0\t-1\tolá\n", "fairseq"),
    "a tsv whose ids start with {": ("{p1}\t1\t-1\tolá\n", "tsv"),
    "a tsv line with a date id": ("2024-01-01\t1\t\tINFO | x\n", "tsv"),
    "a STAPLE line with INFO in it": ("INFO|prompt\nola\n", "staple"),
}


@pytest.mark.parametrize("text, fmt", DETECTED.values(), ids=DETECTED.keys())
def test_detection_names_the_real_format(text, fmt):
    assert detect_format(source(text.encode())) == fmt


MESSAGES = {  # bytes read as a gold, line limit -> (line, message)
    "a NUL byte": (b"p1|hi\nol\x00a|1\n", MAX_LINE_BYTES, 2, "NUL byte at column 3"),
    "UTF-16 text": ("p1|hi\n".encode("utf-16-le"), MAX_LINE_BYTES, 1, "NUL byte at column 2"),
    "a line one byte too long, CRLF": (b"p1|hi\r\nolaa|1\r\n", 5, 2, "line longer than 5 bytes"),
}


@pytest.mark.parametrize("data, limit, line, message", MESSAGES.values(), ids=MESSAGES.keys())
def test_messages_name_the_real_cause(data, limit, line, message):
    with pytest.raises(InputError) as info:
        read_gold(source(data, limit))
    assert str(info.value).startswith(f"in:{line}: ") and message in str(info.value), str(info.value)


def test_the_line_limit_leaves_out_the_line_end():
    text = b"p1|hi\r\nola|1\r\n"  # 'ola|1' is 5 bytes, 7 with its CRLF
    assert read_gold(source(text, 5)).prompts[0].translations == (("ola", 1.0),)


def test_agreement_stays_within_its_bounds():
    x = [0.1, 0.37, 0.52, 0.9, 0.23, 0.71]  # Pearson Rank of a ranking with itself: 1.0000000000000002 unbounded
    assert all(v is None or -1 <= v <= 1 for k, v in agreement(x, x, ["pearson_rank", "pearson_rank_sym"]).items()
               if k != "n")
    assert agreement(x, x, ["pearson_rank"])["pearson_rank"] == 1.0


def test_a_fifo_gold_is_read_once(command_dir):
    path = fifo(command_dir)
    threading.Thread(target=lambda: path.write_text(TWO_PROMPT_GOLD), daemon=True).start()
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "score", "--gold", str(path), "--nbest",
                             str(command_dir / "a.tsv"), "--metrics", "map", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and '"map": 0.75' in result.stdout, result.stderr
