"""fairseq-generate / fairseq-interactive output, run with ``--nbest N``.

Sample id ``i`` (``H-i``, ``D-i``) is the i-th prompt of the gold, 0-based in gold order, as in the
official STAPLE tooling: generate from the gold's prompts in file order. The ``D-`` lines (detokenized,
after ``--post-process``) are used when the file has any, else the ``H-`` lines; everything else (S-,
T-, P-, W-, I-, A- lines, logging) is ignored. Hypotheses of one sample keep file order, which is
fairseq's best-first order.

Scores: fairseq prints its natural-log score divided by ln 2 (base 2), so each score is multiplied by
ln 2 to give the natural-log :attr:`~nbest_eval.data.Hyp.score`. It is the score fairseq printed,
length-normalized unless generation ran with ``--unnormalized``.
"""

from __future__ import annotations

import math
import os
import re
from typing import Dict

from ..data import Gold, Hyp, InputError, NBest
from .common import PathLike, parse_score, read_lines

_HYPOTHESIS = re.compile(r"([HD])-([0-9]+)\t")


def read_nbest(path: PathLike, gold: Gold) -> NBest:
    name = os.fspath(path)
    found: Dict[str, NBest] = {"H": {}, "D": {}}
    current: Dict[str, int] = {}  # kind -> the sample whose lines are being read
    for number, line in read_lines(path):
        match = _HYPOTHESIS.match(line)
        if not match:
            continue
        kind, sample = match.group(1), int(match.group(2))
        if current.get(kind) != sample and sample < len(gold) and gold.prompts[sample].id in found[kind]:
            raise InputError(f"sample id {sample} appears again after other samples (fairseq writes a sample's "
                             f"hypotheses together): two outputs concatenated?", name, number)
        current[kind] = sample
        score_text, _, text = line[match.end():].partition("\t")
        score = parse_score(score_text, name, number) * math.log(2)
        if sample >= len(gold):
            raise InputError(f"sample id {sample} is out of range: the gold has {len(gold)} prompts "
                             f"(sample i is the gold's i-th prompt, from 0)", name, number)
        found[kind].setdefault(gold.prompts[sample].id, []).append(Hyp(text, score))
    return found["D"] or found["H"]
