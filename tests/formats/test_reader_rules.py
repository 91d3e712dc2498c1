"""What the readers refuse and where, and what they read: strict numbers, rank gaps, fairseq quirks
(mixed D-/H-, truncated lines, S- lines of another prompt), messages that name the real cause (NUL
bytes, UTF-16), strict JSON, a gold given as predictions, and lines bounded without reading them
whole. Then fuzzing: whatever bytes a reader gets, it ends in a result or an InputError."""

import io
import math
import tracemalloc

import pytest
from cases import FAIRSEQ_OUTPUT, FUZZ_PIECES, THREE_PROMPT_GOLD, edit, line_source
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Hyp, InputError
from nbest_eval.data import prompt_id
from nbest_eval.formats import LineSource, read_gold, read_nbest
from nbest_eval.formats.common import MAX_LINE_BYTES

# ---------------------------------------------------------------- bounded lines

def test_reading_is_bounded_at_the_default_limit():
    tracemalloc.start()
    try:
        with open("/dev/zero", "rb") as zero, pytest.raises(InputError, match="line longer than 1048576 bytes"):
            list(LineSource(zero, "/dev/zero"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    long_lines = line_source(("x" * (400 << 10) + "\n") * 20)  # detection peeks at ~1 MiB, not 200 such lines
    assert len(long_lines.peek(200)) == 3 and len(list(long_lines)) == 20


def test_cr_only_line_ends_over_the_limit_say_so():
    with pytest.raises(InputError, match="CR-only line ends"):
        read_gold(line_source(b"p1|hi\rola|1\r" * 50, max_line_bytes=100))


def test_the_line_limit_leaves_out_the_line_end():
    text = b"p1|hi\r\nola|1\r\n"  # 'ola|1' is 5 bytes, 7 with its CRLF
    assert read_gold(line_source(text, 5)).prompts[0].translations == (("ola", 1.0),)


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
    ("fairseq", "S-0\twell, what did the coach say?\nH-0\t+3\tx\n", 2, "score '+3' is not a number"),
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
    ("fairseq", "S-0\thi\nH-0\t-1\tolá\n", 1, "S-0 line 'hi' is not gold prompt 0 'well, what did the coach say?'"),
    ("fairseq", "S-0\thi\nH-0\t-1\tolá\n", 1, "it is gold prompt 1: generate from the gold's prompts in gold order"),
    ("fairseq", "S-1\tthe coach <unk>\nH-1\t-1\tx\n", 1, "S-1 line"),
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
    lines = line_source(text, max_line_bytes=100 if "line longer" in message else 1 << 20)
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
        read_gold(line_source(data, limit))
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
    ("fairseq", "S-0\tWELL , what did the &quot;coach&quot; say ?\nH-0\t-inf\tx\nS-1\t<unk>\nH-1\t0\ty\n"
                "S-2\t<unk> valid <unk>\nH-2\t0\tz\n",
     {"p1": [Hyp("x", -math.inf)], "p2": [Hyp("y", 0.0)], "p3": [Hyp("z", 0.0)]}, {}),
    ("jsonl", '{"id": "p2", "hyps": ["a"], "scores": [-Infinity]}\n', {"p2": [Hyp("a", -math.inf)]}, {}),
    # hypotheses ending in |NUMBER among ordinary ones are predictions, not a gold's lines
    ("staple", "p2|hi\nolá|1\noi|2\nx\n", {"p2": [Hyp("olá|1"), Hyp("oi|2"), Hyp("x")]}, {}),
    ("staple", "p2|hi\noi\n\np1|x\nbem|0.5\n", {"p1": [Hyp("bem|0.5")], "p2": [Hyp("oi")]}, {}),
]


@pytest.mark.parametrize("fmt, text, expected, options", READ)
def test_readers_read_odd_but_valid_input_exactly(gold, fmt, text, expected, options):
    assert read_nbest(line_source(text), gold, fmt, **options) == expected


def test_a_numeric_prompt_with_its_staple_id_is_read(gold):
    numeric = read_gold(line_source(f"{prompt_id('42')}|42\nquarenta e dois|1\n"))
    assert numeric.prompts[0].text == "42" and numeric.prompts[0].translations == (("quarenta e dois", 1.0),)



# ---------------------------------------------------------------- fuzzing

FORMATS = ["staple", "fairseq", "tsv", "jsonl", "auto"]
VALID = {
    "gold": THREE_PROMPT_GOLD,
    "staple": "p2|hi\nolá | oi\n  olá\n\np1|x\nbem\n\np3|nothing valid\n",
    "fairseq": FAIRSEQ_OUTPUT[-200:].split("\n", 1)[1] + "D-2\t-1\tx\n",
    "tsv": "prompt_id\trank\tscore\thypothesis\np2\t2\t-2.5\toi\np1\t1\t\tbem | disse\np2\t1\t-1\tolá\np2\t3\t-inf\t\n",
    "jsonl": '{"id": "p2", "hyps": ["olá", "oi"], "scores": [-1, null]}\n\n{"id": "p1", "hyps": []}\n',
}
FUZZ = settings(max_examples=100, deadline=None)

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
    pieces = st.lists(st.sampled_from(FUZZ_PIECES), max_size=40).map(lambda p: "".join(p).encode())

    @FUZZ
    @given(st.binary(max_size=600) | pieces)
    def check(data):
        read_any(fmt, data, gold)

    check()


@pytest.mark.parametrize("fmt", ["gold"] + FORMATS)
def test_edited_valid_files_end_in_a_result_or_an_input_error(gold, fmt):
    valid = VALID["fairseq" if fmt == "auto" else fmt]
    edits = st.tuples(st.sampled_from(["delete", "duplicate", "swap", "cut", "splice", "insert"]),
                      st.integers(0, 10**6), st.sampled_from(FUZZ_PIECES) | st.text(max_size=8))

    @FUZZ
    @given(st.lists(edits, min_size=1, max_size=6))
    def check(changes):
        lines = valid.split("\n")
        for action, index, piece in changes:
            lines = edit(lines, action, index, piece)
        read_any(fmt, "\n".join(lines).encode("utf-8", "surrogatepass"), gold)

    check()
