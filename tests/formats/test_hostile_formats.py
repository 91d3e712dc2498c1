"""Hostile input to the readers and to `nbest-eval score` / `convert` (issue 10; issue 17's detection and
messages).

One table per class of trouble: inputs that can be read only once (stdin, pipes, FIFOs), endless
lines, strict numbers, rank gaps, fairseq quirks (mixed D-/H-, truncated lines, S- lines of another
prompt), messages that name the real cause (NUL bytes, UTF-16), detection past long logs and look-alike
lines, strict JSON, outputs that would overwrite an input or land nowhere, writes cut short by a file
size limit. Then fuzzing: whatever bytes a reader gets, it ends in a result or an InputError.
"""

import io
import json
import math
import os
import resource
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest
from cases import THREE_PROMPT_GOLD, TWO_PROMPT_GOLD
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Hyp, InputError
from nbest_eval.cli import main
from nbest_eval.cli.common import warn_not_finite
from nbest_eval.data import prompt_id
from nbest_eval.formats import LineSource, detect_format, read_gold, read_nbest, save_nbest, write_nbest
from nbest_eval.formats.common import MAX_LINE_BYTES, json_text

# fairseq output behind enough logging that format detection has to look far ahead
FAIRSEQ = "".join(f"2024-01-01 | INFO | fairseq_cli.generate | log line {i}\n" for i in range(150)) + """\
S-1\thi
H-1\t-1.0\tolá
H-1\t-2.0\toi
S-0\tWell , what did the boss say ?
H-0\t-0.5\tbem, o que o chefe disse?
H-0\t-0.75\tnada
"""
# p1: AP 1/2, p2: AP 1; p3 has no valid translation (not counted). trec_eval's counts, over p1 and p2:
# 2 + 2 hypotheses returned, 2 + 2 valid translations, 1 + 2 of them returned
EXPECTED = {"map": 0.75, "n_prompts": 3, "num_q": 2, "num_ret": 4, "num_rel": 4, "num_rel_ret": 3}


def source(text, max_line_bytes=1 << 20) -> LineSource:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return LineSource(io.BytesIO(data), "in", max_line_bytes)


@pytest.fixture
def fairseq_output_dir(gold_file):
    """The folder of gold_file, with gen.out: FAIRSEQ, fairseq-generate's output for that gold."""
    (gold_file.parent / "gen.out").write_text(FAIRSEQ, encoding="utf-8")
    return gold_file.parent


def nbest_eval(*args, **options) -> subprocess.CompletedProcess:
    """``nbest-eval ARGS`` in a fresh process; it never shows a traceback."""
    if "stdout" not in options:
        options.setdefault("capture_output", True)
    result = subprocess.run([sys.executable, "-m", "nbest_eval", *map(str, args)], timeout=60, **options)
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    return result


def strict_json(text):
    """Parse as strict JSON: NaN and Infinity are not JSON."""
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")
    return json.loads(text, parse_constant=refuse)


def score_values(text):
    """score --json's values, less the signatures (each naming its measure and this gold's 3 prompts)."""
    values = strict_json(text)
    for key, signature in values.pop("signatures").items():
        assert signature.startswith(f"{key}|") and "|gold:3p." in signature, signature
    return values


# ---------------------------------------------------------------- inputs read once

def feed_pipe(data: bytes):
    """A pipe with a writer thread: ``/dev/fd/N`` as bash's ``<(...)`` gives it."""
    read_end, write_end = os.pipe()

    def write():
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
    threading.Thread(target=write, daemon=True).start()
    return f"/dev/fd/{read_end}", {"pass_fds": (read_end,)}, lambda: os.close(read_end)


def feed_fifo(tmp: Path, data: bytes):
    fifo = tmp / "nbest.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as pipe:  # blocks until the reader opens it
            pipe.write(data)
    threading.Thread(target=write, daemon=True).start()
    return str(fifo), {}, lambda: None


STREAMS = {  # how the n-best file reaches the command -> (--gold, --nbest, subprocess options, clean-up)
    "file": lambda tmp, data: (tmp / "gold.txt", tmp / "gen.out", {}, lambda: None),
    "stdin as -": lambda tmp, data: (tmp / "gold.txt", "-", {"input": data}, lambda: None),
    "/dev/stdin": lambda tmp, data: (tmp / "gold.txt", "/dev/stdin", {"input": data}, lambda: None),
    "pipe": lambda tmp, data: (tmp / "gold.txt", *feed_pipe(data)),
    "fifo": lambda tmp, data: (tmp / "gold.txt", *feed_fifo(tmp, data)),
    "gold from stdin": lambda tmp, data: ("-", tmp / "gen.out", {"input": THREE_PROMPT_GOLD.encode()}, lambda: None),
}


@pytest.mark.parametrize("how", list(STREAMS))
def test_inputs_read_once_score_like_a_file(fairseq_output_dir, how):
    gold, nbest, options, close = STREAMS[how](fairseq_output_dir, FAIRSEQ.encode())
    try:
        result = nbest_eval("score", "--gold", gold, "--nbest", nbest, "--metrics", "map", "--json", **options)
    finally:
        close()
    assert result.returncode == 0, result.stderr.decode()
    assert score_values(result.stdout) == EXPECTED
    name = "<stdin>" if nbest == "-" else nbest
    assert f"nbest-eval score: reading {name} as fairseq (detected)" in result.stderr.decode()


def test_convert_reads_stdin_and_writes_stdout(fairseq_output_dir, gold):
    result = nbest_eval("convert", "--gold", fairseq_output_dir / "gold.txt", "--nbest", "-", "--to", "tsv", "-",
                        input=FAIRSEQ.encode())
    assert result.returncode == 0, result.stderr.decode()
    assert read_nbest(source(result.stdout), gold, "tsv") == read_nbest(fairseq_output_dir / "gen.out", gold)
    assert "-> standard output" in result.stderr.decode()


def test_per_prompt_to_stdout_moves_the_summary_to_stderr(fairseq_output_dir):
    result = nbest_eval("score", "--gold", fairseq_output_dir / "gold.txt", "--nbest", fairseq_output_dir / "gen.out",
                        "--metrics", "map", "--json", "--per-prompt", "-")
    rows = [strict_json(line) for line in result.stdout.decode().splitlines()]
    assert [row["id"] for row in rows] == ["p1", "p2", "p3"] and [row["map"] for row in rows] == [0.5, 1.0, None]
    assert '"map": 0.75' in result.stderr.decode()


def test_a_closed_output_pipe_ends_quietly(fairseq_output_dir):
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as closed:
        result = nbest_eval("convert", "--gold", fairseq_output_dir / "gold.txt", "--nbest",
                            fairseq_output_dir / "gen.out", "--to", "tsv", "-", stdout=closed, stderr=subprocess.PIPE)
    assert result.returncode == 1 and b"error" not in result.stderr


def test_a_fifo_gold_is_read_once(command_dir):
    path = command_dir / "gold.fifo"
    os.mkfifo(path)
    threading.Thread(target=lambda: path.write_text(TWO_PROMPT_GOLD), daemon=True).start()
    result = subprocess.run([sys.executable, "-m", "nbest_eval", "score", "--gold", str(path), "--nbest",
                             str(command_dir / "a.tsv"), "--metrics", "map", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and '"map": 0.75' in result.stdout, result.stderr


# ---------------------------------------------------------------- bounded lines

@pytest.mark.parametrize("option", ["--gold", "--nbest"])
def test_endless_line_is_an_error_not_a_memory_blow_up(fairseq_output_dir, option):
    paths = {"--gold": fairseq_output_dir / "gold.txt", "--nbest": fairseq_output_dir / "gen.out", option: "/dev/zero"}
    result = nbest_eval("score", *[x for pair in paths.items() for x in pair], "--max-line-bytes", "4096")
    assert result.returncode == 2
    assert "/dev/zero:1: line longer than 4096 bytes; raise the limit with --max-line-bytes" in result.stderr.decode()


def test_reading_is_bounded_at_the_default_limit():
    tracemalloc.start()
    try:
        with open("/dev/zero", "rb") as zero, pytest.raises(InputError, match="line longer than 1048576 bytes"):
            list(LineSource(zero, "/dev/zero"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    long_lines = source(("x" * (400 << 10) + "\n") * 20)  # detection peeks at ~1 MiB, not 200 such lines
    assert len(long_lines.peek(200)) == 3 and len(list(long_lines)) == 20


def test_cr_only_line_ends_over_the_limit_say_so():
    with pytest.raises(InputError, match="CR-only line ends"):
        read_gold(source(b"p1|hi\rola|1\r" * 50, max_line_bytes=100))


def test_the_line_limit_leaves_out_the_line_end():
    text = b"p1|hi\r\nola|1\r\n"  # 'ola|1' is 5 bytes, 7 with its CRLF
    assert read_gold(source(text, 5)).prompts[0].translations == (("ola", 1.0),)


# ---------------------------------------------------------------- readers: what is refused, where

ARABIC_3, FULLWIDTH_1 = "\u0663", "\uff11"

REFUSED = [  # (format, text, line, message); format "gold" reads the text as the gold
    # strict numbers: weights
    *[("gold", f"p1|hi\nola|{w}\n", 2, f"weight {w!r} is not a number")
      for w in ["1_0", "+3", ARABIC_3, " 3", "3 ", "3 3", "0x10", "1e", ".", "-", "Infinity", "nan"]],
    ("gold", "p1|hi\nola|1e999\n", 2, "must be a finite non-negative number"),
    ("gold", "p1|hi\nola|-0.5\n", 2, "must be a finite non-negative number"),
    # strict numbers: scores
    *[("tsv", f"p1\t1\t{s}\tx\n", 1, f"score {s!r} is not a number")
      for s in ["1_0", "+3", ARABIC_3, " -1", "-1 ", "Infinity", "inf", "+inf", "-INF", "nan"]],
    ("tsv", "p1\t1\t1e999\tx\n", 1, "score '1e999' is too large: +inf is not a log-probability"),
    ("fairseq", "S-0\twell, what did the boss say?\nH-0\t+3\tx\n", 2, "score '+3' is not a number"),
    # strict numbers: ranks
    *[("tsv", f"p1\t{r}\t\tx\n", 1, f"rank {r!r} is not an integer >= 1 (ASCII digits only)")
      for r in ["+1", FULLWIDTH_1, " 1", "1.0", "1e0", "0", "1_0"]],
    ("tsv", "p1\t" + "9" * 5000 + "\t\tx\n", 1, "is not an integer >= 1"),
    # rank gaps
    ("tsv", "p1\t1\t\ta\np1\t5\t\tb\np1\t100\t\tc\n", 2, "prompt 'p1' has rank 5 but no rank 2"),
    ("tsv", "p2\t2\t\tb\n", 1, "has rank 2 but no rank 1: ranks must be 1, 2, 3, ... (use --allow-rank-gaps"),
    # fairseq: truncated lines, S- lines of another prompt, absurd sample ids
    ("fairseq", "S-2\tnothing valid\nH-2\t-1.5\n", 2, "truncated H- line"),
    ("fairseq", "H-2\t-1.5\tok\nH-2\n", 2, "truncated H- line"),
    ("fairseq", "D-1\t-1\n", 1, "truncated D- line"),
    ("fairseq", "S-0\thi\nH-0\t-1\tolá\n", 1, "S-0 line 'hi' is not gold prompt 0 'well, what did the boss say?'"),
    ("fairseq", "S-0\thi\nH-0\t-1\tolá\n", 1, "it is gold prompt 1: generate from the gold's prompts in gold order"),
    ("fairseq", "S-1\tthe boss <unk>\nH-1\t-1\tx\n", 1, "S-1 line"),
    ("fairseq", "H-" + "9" * 5000 + "\t-1\tx\n", 1, "sample id of 5000 digits is out of range"),
    # gold messages in the user's terms
    ("gold", "p1|42\nquarenta e dois|1\n", 1, "reads as translation 'p1' with weight 42; if it is an id line whose "
                                              f"prompt is a number, the id must be the prompt's STAPLE id "
                                              f"({prompt_id('42')})"),
    ("gold", "my id|hello\nola|1\n", 1, "block has no 'ID|PROMPT' line: 'my id' cannot be a prompt id, which has no "
                                        "spaces"),
    ("gold", "p1|hi\rola|0.5\rp2|oi\r", 1, "carriage return (CR) inside a line: a file with CR-only line ends?"),
    ("staple", "p1|hi\rola\r", 1, "CR-only line ends"),
    ("tsv", "p1\t1\t\tx\rp1\t2\t\ty\r", 1, "CR-only line ends"),
    # JSON that is not text, too deep, or too large
    ("jsonl", '{"id": "p1", "hyps": ["\\ud800"]}\n', 1, "lone surrogate"),
    ("jsonl", '{"id": "\\udfff", "hyps": []}\n', 1, "lone surrogate"),
    ("jsonl", "[" * 100_000 + "]" * 100_000 + "\n", 1, "invalid JSON: nested too deeply"),
    ("jsonl", '{"id": "p1", "hyps": ["a"], "scores": [1' + "0" * 5000 + "]}\n", 1, "invalid JSON"),
    ("jsonl", '{"id": "p1", "hyps": ["a"], "scores": [Infinity]}\n', 1, "nan and +inf are no log-probability"),
    # a gold read as predictions (a copy of it as the n-best file): its hypotheses would all score 0
    *[("staple", text, line, "this looks like a STAPLE gold file (translation|weight lines), not predictions")
      for text, line in [(THREE_PROMPT_GOLD, 2), ("p3|nothing valid\n\np2|hi\nolá|1\n\np1|x\nbem|0.5\noi|2e-05\n", 4),
                         ("p2|hi\nolá|1.0\n", 2)]],
    # bounded lines
    ("gold", "p1|" + "x" * 300 + "\n", 1, "line longer than 100 bytes"),
    ("tsv", "p1\t1\t\t" + "x" * 300 + "\n", 1, "line longer than 100 bytes"),
]


@pytest.mark.parametrize("fmt, text, line, message", REFUSED)
def test_readers_refuse_with_file_and_line(gold, fmt, text, line, message):
    lines = source(text, max_line_bytes=100 if "line longer" in message else 1 << 20)
    with pytest.raises(InputError) as info:
        if fmt == "gold":
            read_gold(lines)
        else:
            read_nbest(lines, gold, fmt)
    assert str(info.value).startswith(f"in:{line}: "), str(info.value)
    assert message in str(info.value), str(info.value)


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


READ = [  # (format, text, expected lists, read_nbest options)
    ("tsv", "p1\t1\t-inf\tx\np1\t2\t1e+300\ty\np1\t3\t-.5e-3\tz\n",
     {"p1": [Hyp("x", -math.inf), Hyp("y", 1e300), Hyp("z", -0.0005)]}, {}),
    ("tsv", "p1\t100\t\tc\np1\t5\t\tb\np1\t1\t\ta\n", {"p1": [Hyp("a"), Hyp("b"), Hyp("c")]},
     {"allow_rank_gaps": True}),
    ("tsv", "p1\t01\t\ta\np1\t2\t\tb\n", {"p1": [Hyp("a"), Hyp("b")]}, {}),
    # mixed D-/H-: each sample falls back on its own
    ("fairseq", "H-0\t-1\tbem@@ \nD-0\t-1\tbem\nH-1\t-2\toi\nH-2\t-3\tx\nD-2\t-3\tX\n",
     {"p1": [Hyp("bem", -math.log(2))], "p2": [Hyp("oi", -2 * math.log(2))], "p3": [Hyp("X", -3 * math.log(2))]}, {}),
    # S- lines as fairseq prints them: tokenized, escaped, with words missing from the dictionary
    ("fairseq", "S-0\tWELL , what did the &quot;boss&quot; say ?\nH-0\t-inf\tx\nS-1\t<unk>\nH-1\t0\ty\n"
                "S-2\t<unk> valid <unk>\nH-2\t0\tz\n",
     {"p1": [Hyp("x", -math.inf)], "p2": [Hyp("y", 0.0)], "p3": [Hyp("z", 0.0)]}, {}),
    ("jsonl", '{"id": "p2", "hyps": ["a"], "scores": [-Infinity]}\n', {"p2": [Hyp("a", -math.inf)]}, {}),
    # hypotheses ending in |NUMBER among ordinary ones are predictions, not a gold's lines
    ("staple", "p2|hi\nolá|1\noi|2\nx\n", {"p2": [Hyp("olá|1"), Hyp("oi|2"), Hyp("x")]}, {}),
    ("staple", "p2|hi\noi\n\np1|x\nbem|0.5\n", {"p1": [Hyp("bem|0.5")], "p2": [Hyp("oi")]}, {}),
]


@pytest.mark.parametrize("fmt, text, expected, options", READ)
def test_readers_read_odd_but_valid_input_exactly(gold, fmt, text, expected, options):
    assert read_nbest(source(text), gold, fmt, **options) == expected


def test_a_numeric_prompt_with_its_staple_id_is_read(gold):
    numeric = read_gold(source(f"{prompt_id('42')}|42\nquarenta e dois|1\n"))
    assert numeric.prompts[0].text == "42" and numeric.prompts[0].translations == (("quarenta e dois", 1.0),)


def test_detection_only_peeks(gold):
    lines = source(FAIRSEQ)
    assert detect_format(lines) == "fairseq"
    assert read_nbest(lines, gold, "fairseq") == read_nbest(source(FAIRSEQ), gold)


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


# ---------------------------------------------------------------- strict JSON

def test_json_writers_emit_strict_json(tmp_path, gold, capsys):
    with pytest.raises(InputError, match="prompt 'p1', rank 2: score -inf cannot be written to a JSON file; write tsv"):
        write_nbest({"p1": [Hyp("a", -1.0), Hyp("b", -math.inf)]}, tmp_path / "n.jsonl", "jsonl")
    assert not (tmp_path / "n.jsonl").exists()
    with pytest.raises(InputError, match="score nan cannot be written to a TSV file"):
        write_nbest({"p1": [Hyp("a", math.nan)]}, tmp_path / "n.tsv", "tsv")
    save_nbest({"p1": [Hyp("a")]}, tmp_path, "run", record={"map": math.nan, "by_worker": [{"map": math.inf}]})
    assert strict_json((tmp_path / "run.json").read_text()) == {"nbest": "run.tsv", "map": None,
                                                               "by_worker": [{"map": None}]}
    assert json_text({"a": [math.nan, -math.inf, 1.5]}) == '{"a": [null, null, 1.5]}'
    warn_not_finite("score", "--json", [{"id": "p1", "map": 0.5, "wf1": math.nan}])
    assert "--json: 1 row(s) hold nan or infinite values, written as null (first: wf1 = nan)" in capsys.readouterr().err


# ---------------------------------------------------------------- the commands refuse up front

TSV_GAPS = "p1\t1\t\tx\np1\t5\t\ty\n"
REFUSALS = [  # (name, arguments with {dir}, n-best text, message); nothing is written
    ("gold and n-best from one stdin", ["score", "--gold", "-", "--nbest", "-"], None,
     "--gold and --nbest both read standard input, which can be read only once"),
    ("output is the n-best file", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "tsv",
                                   "{dir}/n.txt", "--force"], TSV_GAPS,
     "OUT is also an input; refusing to overwrite it, even with --force"),
    ("output is the gold", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--per-prompt",
                            "{dir}/gold.txt", "--force"], TSV_GAPS, "--per-prompt is also an input"),
    ("trec output is the gold", ["convert", "--gold", "{dir}/gold.txt.qrels", "--nbest", "{dir}/n.txt", "--to",
                                 "trec", "{dir}/gold.txt", "--force"], TSV_GAPS, "OUT.qrels is also an input"),
    ("missing folder", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--per-prompt",
                        "{dir}/nope/p.jsonl"], TSV_GAPS, "--per-prompt: its folder"),
    ("trec to stdout", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "trec", "-"],
     TSV_GAPS, "--to trec writes two files"),
    ("rank gaps", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "jsonl",
                   "{dir}/out.jsonl"], TSV_GAPS, "n.txt:2: prompt 'p1' has rank 5 but no rank 2"),
    ("strict numbers", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"], "p1\t1\t+3\tx\n",
     "n.txt:1: score '+3' is not a number"),
    ("truncated line", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"], "H-0\t-1\n",
     "n.txt:1: truncated H- line"),
    ("S- line of another prompt", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt"],
     "S-0\thi\nH-0\t-1\tolá\n", "n.txt:1: S-0 line 'hi' is not gold prompt 0"),
    ("-inf to JSON", ["convert", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--to", "jsonl",
                      "{dir}/out.jsonl"], "p1\t1\t-inf\tx\n", "score -inf cannot be written to a JSON file"),
    ("bad --max-line-bytes", ["score", "--gold", "{dir}/gold.txt", "--nbest", "{dir}/n.txt", "--max-line-bytes",
                              "1_0"], TSV_GAPS, "expected an integer >= 1"),
]


@pytest.mark.parametrize("args, nbest, message", [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS])
def test_commands_refuse_up_front_and_write_nothing(tmp_path, capsys, args, nbest, message):
    (tmp_path / "gold.txt").write_text(THREE_PROMPT_GOLD)
    (tmp_path / "gold.txt.qrels").write_text(THREE_PROMPT_GOLD)
    if nbest is not None:
        (tmp_path / "n.txt").write_text(nbest)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    try:
        status = main([a.format(dir=tmp_path) for a in args])
    except SystemExit as exit:  # argparse refuses an option's value
        status = exit.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_rank_gaps_allowed_on_request(tmp_path, capsys):
    (tmp_path / "gold.txt").write_text(THREE_PROMPT_GOLD)
    (tmp_path / "n.tsv").write_text(TSV_GAPS)
    assert main(["score", "--gold", str(tmp_path / "gold.txt"), "--nbest", str(tmp_path / "n.tsv"), "--json",
                 "--metrics", "map", "--allow-rank-gaps"]) == 0
    assert score_values(capsys.readouterr().out) == {"map": 0.0, "n_prompts": 3, "num_q": 2, "num_ret": 2,
                                                     "num_rel": 4, "num_rel_ret": 0}  # x, y: neither valid


# ---------------------------------------------------------------- writes cut short

def file_size_limit(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_write_cut_short_leaves_nothing(tmp_path):
    gold = tmp_path / "gold.txt"
    gold.write_text("".join(f"p{i}|prompt {i}\n" + "".join(f"translation {i} {j}|1\n" for j in range(200)) + "\n"
                            for i in range(5)))
    (tmp_path / "one.tsv").write_text("".join(f"p{i}\t1\t\ttranslation {i} 0\n" for i in range(5)))
    (tmp_path / "all.tsv").write_text("".join(f"p{i}\t{j + 1}\t\ttranslation {i} {j}\n"
                                              for i in range(5) for j in range(200)))
    for args in (["--nbest", tmp_path / "one.tsv", "--to", "trec", tmp_path / "r"],  # the run fits, the qrels not
                 ["--nbest", tmp_path / "all.tsv", "--to", "staple", tmp_path / "out.txt"]):
        before = sorted(tmp_path.iterdir())
        result = nbest_eval("convert", "--gold", gold, *args, preexec_fn=file_size_limit(4096))
        assert result.returncode == 2 and b"File too large" in result.stderr, result.stderr
        assert sorted(tmp_path.iterdir()) == before  # no output, no partial file
        assert nbest_eval("convert", "--gold", gold, *args).returncode == 0  # and nothing in a re-run's way
    assert (tmp_path / "r.run").stat().st_size < 4096 < (tmp_path / "r.qrels").stat().st_size


# ---------------------------------------------------------------- fuzzing

FORMATS = ["staple", "fairseq", "tsv", "jsonl", "auto"]
VALID = {
    "gold": THREE_PROMPT_GOLD,
    "staple": "p2|hi\nolá | oi\n  olá\n\np1|x\nbem\n\np3|nothing valid\n",
    "fairseq": FAIRSEQ[-200:].split("\n", 1)[1] + "D-2\t-1\tx\n",
    "tsv": "prompt_id\trank\tscore\thypothesis\np2\t2\t-2.5\toi\np1\t1\t\tbem | disse\np2\t1\t-1\tolá\np2\t3\t-inf\t\n",
    "jsonl": '{"id": "p2", "hyps": ["olá", "oi"], "scores": [-1, null]}\n\n{"id": "p1", "hyps": []}\n',
}
FUZZ = settings(max_examples=100, deadline=None)
PIECES = ["|", "\t", "\r", "\n", "\ufeff", "-", "+", "_", "1", "0.5", "-inf", "inf", "nan", "1e999", "٣", "<unk>",
          "H-0\t", "D-1\t", "S-2\t", "p1", "prompt_id", '{"id": "p1", "hyps": [', "]}", "\\ud800", "\x00", "\xff"]


def read_any(fmt: str, data: bytes, gold) -> None:
    """Read with a small line limit; anything but a result or an InputError fails the test."""
    lines = LineSource(io.BytesIO(data), "fuzz", max_line_bytes=256)
    try:
        if fmt == "gold":
            read_gold(lines)
        else:
            read_nbest(lines, gold, fmt, allow_rank_gaps=fmt == "auto")
    except InputError:
        pass


@pytest.mark.parametrize("fmt", ["gold"] + FORMATS)
def test_random_bytes_end_in_a_result_or_an_input_error(gold, fmt):
    @FUZZ
    @given(st.binary(max_size=600) | st.lists(st.sampled_from(PIECES), max_size=40).map(lambda p: "".join(p).encode()))
    def check(data):
        read_any(fmt, data, gold)

    check()


def edit(lines, action, index, piece):
    """One random edit of a file's lines: delete, duplicate, swap, cut short or splice in a piece."""
    if not lines:
        return [piece]
    i = index % len(lines)
    line = lines[i]
    return {"delete": lines[:i] + lines[i + 1:],
            "duplicate": lines[:i + 1] + lines[i:],
            "swap": lines[:i] + lines[i + 1:i + 2] + [line] + lines[i + 2:],
            "cut": lines[:i] + [line[:index % (len(line) + 1)]] + lines[i + 1:],
            "splice": lines[:i] + [line[:index % (len(line) + 1)] + piece + line[index % (len(line) + 1):]]
                      + lines[i + 1:],
            "insert": lines[:i] + [piece] + lines[i:]}[action]


@pytest.mark.parametrize("fmt", ["gold"] + FORMATS)
def test_edited_valid_files_end_in_a_result_or_an_input_error(gold, fmt):
    valid = VALID["fairseq" if fmt == "auto" else fmt]
    edits = st.tuples(st.sampled_from(["delete", "duplicate", "swap", "cut", "splice", "insert"]),
                      st.integers(0, 10**6), st.sampled_from(PIECES) | st.text(max_size=8))

    @FUZZ
    @given(st.lists(edits, min_size=1, max_size=6))
    def check(changes):
        lines = valid.split("\n")
        for action, index, piece in changes:
            lines = edit(lines, action, index, piece)
        read_any(fmt, "\n".join(lines).encode("utf-8", "surrogatepass"), gold)

    check()
