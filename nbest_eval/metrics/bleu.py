"""x-best y-reference BLEU (Bremerman et al. 2020, section 5), computed without a pseudo-corpus.

The definition is sacrebleu's ``corpus_bleu`` over a pseudo-corpus where each of a prompt's top x
hypotheses is a segment whose references are the prompt's y highest-weight gold translations. Built
literally, that re-extracts the same references once per hypothesis. :class:`BleuEngine` extracts
each prompt's references once, with sacrebleu's own preprocessing and n-gram code, keeps them for
later validations, and sums the same segment statistics (sacrebleu's clipping and closest-reference
rule) into sacrebleu's ``compute_bleu``, so the score is identical.

Prompts with no gold translation have no references and contribute nothing (sacrebleu cannot score
a segment without references either).
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams

from ..data import GoldPrompt, InputError
from ..prompt import Judged
from .base import Metric
from .registry import register

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
        if tokenize not in BLEU.TOKENIZERS:
            raise InputError(f"unknown BLEU tokenizer {tokenize!r}; sacrebleu has: {', '.join(BLEU.TOKENIZERS)}")
        if smooth_method not in BLEU.SMOOTH_DEFAULTS:
            raise InputError(f"unknown BLEU smoothing {smooth_method!r}; sacrebleu has: "
                             f"{', '.join(BLEU.SMOOTH_DEFAULTS)}")
        try:
            self.bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method,
                             smooth_value=smooth_value, force=True)
        except (ImportError, RuntimeError) as err:  # e.g. ja-mecab without its package
            raise InputError(f"sacrebleu cannot use the BLEU tokenizer {tokenize!r}: {err}") from None
        self.num_stats = 2 + 2 * self.bleu.max_ngram_order
        self._references: Dict[Tuple[GoldPrompt, Optional[int]], dict] = {}

    def reference_info(self, prompt: GoldPrompt, y: Optional[int]) -> Optional[dict]:
        """sacrebleu's reference n-grams (max count over references) and lengths, or None without references."""
        key = (prompt, y)
        if key not in self._references:
            refs = [self.bleu._preprocess_segment(r) for r in top_references(prompt, y)]
            self._references[key] = self.bleu._extract_reference_info(refs) if refs else None
            if refs:
                self._references[key]["closest"] = {}  # hypothesis length -> closest reference length
        return self._references[key]

    def segment_stats(self, preprocessed_hyps: Sequence[str], prompt: GoldPrompt, y: Optional[int]) -> List[int]:
        """Summed segment statistics [sys_len, ref_len, correct_1..N, total_1..N], as sacrebleu's
        ``_compute_segment_statistics`` gives them, with two shortcuts: the closest reference length
        is looked up once per hypothesis length, and an L-token hypothesis has max(0, L-n+1) n-grams."""
        order = self.bleu.max_ngram_order
        stats = [0] * self.num_stats
        info = self.reference_info(prompt, y)
        if info is None:
            return stats
        ref_ngrams, closest = info["ref_ngrams"].get, info["closest"]
        for hyp in preprocessed_hyps:
            ngrams, length = extract_all_word_ngrams(hyp, 1, order)
            if length not in closest:
                closest[length] = self.bleu._get_closest_ref_len(length, info["ref_lens"])
            stats[0] += length
            stats[1] += closest[length]
            for ngram, count in ngrams.items():
                matched = ref_ngrams(ngram)
                if matched:  # clipped count: min(count, matched), inlined on this hot path
                    stats[1 + len(ngram)] += count if count < matched else matched
            for n in range(min(order, length)):
                stats[2 + order + n] += length - n
        return stats

    def preprocess(self, texts: Sequence[str]) -> List[str]:
        return [self.bleu._preprocess_segment(t) for t in texts]

    def score(self, stats: Sequence[float]) -> float:
        return self.bleu._compute_score_from_stats([int(round(v)) for v in stats]).score


class XYBleu(Metric):
    """``bleu_{x}x{y}``: the top x hypotheses of each prompt against its top y references."""

    PATTERN = re.compile(r"bleu_([1-9][0-9]*|all)x([1-9][0-9]*|all)")

    def __init__(self, key: str, engine: BleuEngine):
        x, y = self.PATTERN.fullmatch(key).groups()
        self.key, self.x, self.y, self.engine = key, parse_count(x), parse_count(y), engine
        order = engine.bleu.max_ngram_order
        self.stat_names = tuple(f"{key}:{n}" for n in
                                ["sys_len", "ref_len"] + [f"correct_{i}" for i in range(1, order + 1)]
                                + [f"total_{i}" for i in range(1, order + 1)])

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        hyps = _preprocessed(judged, self.engine, self.x)
        stats = self.engine.segment_stats(hyps, judged.gold.prompt, self.y)
        return dict(zip(self.stat_names, map(float, stats)))

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        return self.engine.score([stats.get(n, 0.0) for n in self.stat_names])


def _preprocessed(judged: Judged, engine: BleuEngine, x: Optional[int]) -> List[str]:
    """The top x tokenized hypotheses; tokenized once per list and shared by all BLEU variants."""
    done = judged.memo.setdefault(engine, [])
    wanted = len(judged.hyps) if x is None else min(x, len(judged.hyps))
    if len(done) < wanted:
        done += engine.preprocess([h.text for h in judged.hyps[len(done):wanted]])
    return done[:wanted]


register("bleu_{x}x{y}", XYBleu.PATTERN.pattern,
         "BLEU of each prompt's top x hypotheses against its y highest-weight translations (x, y: a count or "
         "`all`): equals sacrebleu's `corpus_bleu` on that pseudo-corpus, 0-100")(
    lambda match, options: XYBleu(match.group(0), options.bleu()))
