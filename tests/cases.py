"""Test data and helpers every test folder shares (``from cases import ...``; the fixtures built on
them are in conftest.py): two small hand-written golds, random gold sets and n-best lists for oracle
tests (seeded, small, with the tricky bits: duplicates that normalize alike, punctuation/case
variants, nil-answer prompts, empty lists), trec_eval's inputs, located InputErrors, fairseq output
behind a long log, the command run in a fresh process, strict JSON, and the fuzzers' pieces and edits."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from nbest_eval import Gold, GoldPrompt, Hyp, InputError, norm
from nbest_eval.formats import LineSource

# The gold the readers and writers are tested on (conftest's ``gold``): p1, a sentence that fairseq
# prints tokenized ('Well , what did the coach say ?'), with a translation that holds ' | '; p2, a
# word with two translations; two blank lines; p3, a nil-answer prompt (no valid translation).
THREE_PROMPT_GOLD = """\
p1|well, what did the coach say?
bem, o que o treinador disse?|0.5
o treinador | a treinador disse|0.25

p2|hi
olá|1.0
oi|0.5


p3|nothing valid
"""

# The gold the commands are run on (conftest's ``command_dir``): p1 with two valid translations, p2
# with one.
TWO_PROMPT_GOLD = "p1|hi\nolá|1.0\noi|0.5\n\np2|bye\ntchau|1\n"

# fairseq-generate's output for THREE_PROMPT_GOLD behind enough logging that format detection has to
# look far ahead
FAIRSEQ_OUTPUT = "".join(f"2024-01-01 | INFO | fairseq_cli.generate | log line {i}\n" for i in range(150)) + """\
S-1\thi
H-1\t-1.0\tolá
H-1\t-2.0\toi
S-0\tWell , what did the coach say ?
H-0\t-0.5\tbem, o que o treinador disse?
H-0\t-0.75\tnada
"""

# The synthetic corpus in memory (conftest's ``synth``): what the subword fairseq tests train on and
# the synth tests check.
SYNTH_CORPUS = {"seed": 1, "train_pairs": 1500, "valid_prompts": 24}

WORDS = "a o casa gato cão come bebe vê quer livro água leite hoje agora muito bem".split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def variant(rng: random.Random, text: str) -> str:
    """A surface variant that normalizes to the same STAPLE key (case, punctuation)."""
    return rng.choice([text.upper(), text + ".", "¿" + text + "?", text.capitalize() + "!", text])


def random_case(seed: int, n_prompts: int = 20, nil_prompts: bool = True, max_valid: int = 12,
                max_hyps: int = 15, integer_weights: bool = False) -> Tuple[Gold, dict]:
    rng = random.Random(seed)
    prompts, nbest = [], {}
    for p in range(n_prompts):
        n_valid = rng.randint(0 if nil_prompts else 1, max_valid)
        valid = list(dict.fromkeys(sentence(rng) for _ in range(n_valid)))
        weights = [float(rng.randint(1, 5)) if integer_weights else rng.random() for _ in valid]
        prompts.append(GoldPrompt(f"prompt_{p}", f"source {p}", tuple(zip(valid, weights))))
        hyps: List[Hyp] = []
        for _ in range(rng.randint(0, max_hyps)):
            text = variant(rng, rng.choice(valid)) if valid and rng.random() < 0.5 else sentence(rng)
            hyps.append(Hyp(text, -rng.random() * 10))
        hyps.sort(key=lambda h: -h.score)
        if hyps:
            nbest[f"prompt_{p}"] = hyps
    return Gold(prompts), nbest


def quality_lists(folder: Path, quality, seed: int = 11, n_prompts: int = 30):
    """Checkpoints' n-best files (tsv) on a random gold written to ``folder``: checkpoint i lists every
    valid translation first for a share ``quality[i]`` of the prompts (the rest: noise), so a measure
    rises and falls with ``quality``. Returns the gold and the files' paths."""
    from nbest_eval.formats import write_gold, write_nbest

    gold, nbest = random_case(seed, n_prompts=n_prompts, nil_prompts=False)
    rng = random.Random(5)
    write_gold(gold, folder / "gold.txt")
    paths = []
    for i, share in enumerate(quality):
        lists = {}
        for prompt in gold:
            noise = rng.sample(nbest.get(prompt.id, []), len(nbest.get(prompt.id, []))) or [Hyp("nada")]
            good = rng.random() < share
            lists[prompt.id] = [Hyp(text) for text, _ in prompt.translations] + noise if good else noise
        paths.append(str(folder / f"checkpoint{i + 1}.tsv"))
        write_nbest(lists, paths[-1], "tsv")
    return gold, paths


def pattern_keys(spec, numbers=("2", "0.2", "3", "0.7", "1.0", "all")) -> List[str]:
    """The keys of the registered metric ``spec`` that its pattern gives with one of ``numbers`` in each
    placeholder, in that order (p{k}: p2, p3; bleu_{x}x{y}: bleu_2x2, bleu_3x3, bleu_allxall); a key
    without a placeholder gives itself. ValueError if none is a key (docs/architecture.md: a pattern
    should take 2 or 0.2)."""
    keys = [key for key in dict.fromkeys(re.sub(r"\{\w+\}", n, spec.pattern) for n in numbers)
            if spec.regex.fullmatch(key)]
    if not keys:
        raise ValueError(f"{spec.pattern}: none of {', '.join(numbers)} makes it a key")
    return keys


def trec_inputs(gold, nbest, graded):
    """trec_eval's (qrels, run) for a gold and n-best lists: each prompt's normalized valid translations
    (graded: their weights as integers, else 1) and its list's distinct keys scored by rank."""
    qrels, run = {}, {}
    for prompt in gold:
        weights = {}
        for text, w in prompt.translations:
            weights[norm(text)] = w
        if not weights:
            continue
        qrels[prompt.id] = {k: int(w) if graded else 1 for k, w in weights.items()}
        keys = list(dict.fromkeys(norm(h.text) for h in nbest.get(prompt.id, [])))
        if keys:  # trec_eval cannot take an empty run; those prompts are checked separately
            run[prompt.id] = {k: float(len(keys) - i) for i, k in enumerate(keys)}
    return qrels, run


@contextlib.contextmanager
def raises_at(path: Path, line, match: str):
    """Expect an InputError located at ``path:line`` (or just ``path``) whose message contains ``match``."""
    with pytest.raises(InputError) as info:
        yield
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: " if line is not None else f"{path}: "), message
    assert match in message, message


def assert_png(path) -> None:
    """``path`` is a PNG image of some size (a figure drawn, not an empty or broken file)."""
    from matplotlib.image import imread

    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = imread(path).shape[:2]
    assert height > 50 and width > 50


def line_source(text, max_line_bytes=1 << 20) -> LineSource:
    """``text`` (str or bytes) as a reader's input named ``in``."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return LineSource(io.BytesIO(data), "in", max_line_bytes)


def run_nbest_eval(*args, **options) -> subprocess.CompletedProcess:
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
    """score --json's values on THREE_PROMPT_GOLD, less the signatures (each naming its measure and
    that gold's 3 prompts)."""
    values = strict_json(text)
    for key, signature in values.pop("signatures").items():
        assert signature.startswith(f"{key}|") and "|gold:3p." in signature, signature
    return values


# what the fuzzers splice into files: separators, line ends, numbers and their look-alikes, line heads
FUZZ_PIECES = ["|", "\t", "\r", "\n", "\ufeff", "-", "+", "_", "1", "0.5", "-inf", "inf", "nan", "1e999", "٣", "<unk>",
               "H-0\t", "D-1\t", "S-2\t", "p1", "prompt_id", '{"id": "p1", "hyps": [', "]}", "\\ud800", "\x00", "\xff"]


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
