"""x-best y-reference BLEU (Bremerman et al. 2020, section 5), computed without a pseudo-corpus.

The definition is sacrebleu's ``corpus_bleu`` over a pseudo-corpus where each of a prompt's top x
hypotheses is a segment whose references are the prompt's y highest-weight gold translations. Built
literally, that re-extracts the same references once per hypothesis. :class:`BleuEngine` extracts
each prompt's references once, with sacrebleu's own preprocessing and n-gram code, keeps them for
later validations, and sums sacrebleu's own segment statistics, so the score is identical.

Prompts with no gold translation have no references and contribute nothing (sacrebleu cannot score
a segment without references either).
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from sacrebleu.metrics.bleu import BLEU

from ..data import GoldPrompt
from ..prompt import Judged
from .base import Metric

ALL = None  # x or y of "all"


def parse_count(text: str) -> Optional[int]:
    return ALL if text == "all" else int(text)


def top_references(prompt: GoldPrompt, y: Optional[int]) -> List[str]:
    """The y highest-weight gold translations, raw text; ties keep file order (stable sort)."""
    ranked = sorted(prompt.translations, key=lambda tw: -tw[1])
    return [text for text, _ in ranked[:y]]


class BleuEngine:
    """sacrebleu's BLEU with per-prompt reference statistics cached across calls."""

    def __init__(self, tokenize: str = "13a", lowercase: bool = False,
                 smooth_method: str = "exp", smooth_value: Optional[float] = None):
        self.bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method,
                         smooth_value=smooth_value, force=True)
        self.num_stats = 2 + 2 * self.bleu.max_ngram_order
        self._references: Dict[Tuple[GoldPrompt, Optional[int]], dict] = {}

    def reference_info(self, prompt: GoldPrompt, y: Optional[int]) -> Optional[dict]:
        key = (prompt, y)
        if key not in self._references:
            refs = [self.bleu._preprocess_segment(r) for r in top_references(prompt, y)]
            info = self.bleu._extract_reference_info(refs) if refs else None
            if info is not None:
                # the closest reference length depends only on the distinct lengths (ties go to the
                # shorter one): keeping each once spares a scan over all y lengths per hypothesis
                info["ref_lens"] = sorted(set(info["ref_lens"]))
            self._references[key] = info
        return self._references[key]

    def segment_stats(self, preprocessed_hyps: Sequence[str], prompt: GoldPrompt, y: Optional[int]) -> List[int]:
        """Summed sacrebleu segment statistics: [sys_len, ref_len, correct_1..N, total_1..N]."""
        info = self.reference_info(prompt, y)
        if info is None or not preprocessed_hyps:
            return [0] * self.num_stats
        rows = [self.bleu._compute_segment_statistics(hyp, info) for hyp in preprocessed_hyps]
        return [sum(column) for column in zip(*rows)]

    def preprocess(self, texts: Sequence[str]) -> List[str]:
        return [self.bleu._preprocess_segment(t) for t in texts]

    def score(self, stats: Sequence[float]) -> float:
        return self.bleu._compute_score_from_stats([int(round(v)) for v in stats]).score


class XYBleu(Metric):
    """``bleu_{x}x{y}``: the top x hypotheses of each prompt against its top y references."""

    PATTERN = re.compile(r"bleu_(\d+|all)x(\d+|all)")

    def __init__(self, key: str, engine: BleuEngine):
        x, y = self.PATTERN.fullmatch(key).groups()
        self.key, self.x, self.y, self.engine = key, parse_count(x), parse_count(y), engine
        order = engine.bleu.max_ngram_order
        self.stat_names = tuple(f"{key}:{n}" for n in
                                ["sys_len", "ref_len"] + [f"correct_{i}" for i in range(1, order + 1)]
                                + [f"total_{i}" for i in range(1, order + 1)])

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        hyps = _preprocessed(judged, self.engine)[: self.x]
        stats = self.engine.segment_stats(hyps, judged.gold.prompt, self.y)
        return dict(zip(self.stat_names, map(float, stats)))

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        return self.engine.score([stats.get(n, 0.0) for n in self.stat_names])


def _preprocessed(judged: Judged, engine: BleuEngine) -> List[str]:
    """The tokenized hypotheses, shared by all BLEU variants scoring this list."""
    if engine not in judged.memo:
        judged.memo[engine] = engine.preprocess([h.text for h in judged.hyps])
    return judged.memo[engine]
