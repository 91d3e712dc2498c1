"""x-best y-reference BLEU (Bremerman et al. 2020, section 5), computed without a pseudo-corpus.

The definition is sacrebleu's ``corpus_bleu`` over a pseudo-corpus where each of a prompt's top x
hypotheses is a segment whose references are the prompt's y highest-weight gold translations. Built
literally, that re-extracts the same references once per hypothesis. :class:`BleuEngine` extracts
each prompt's references once (sacrebleu's preprocessing and n-gram extraction, or faster functions
tested to be the same), keeps them for later validations, caches every distinct string's
tokenization (hypotheses repeat across validations and checkpoints; references are shared by the
variants), and sums the same segment statistics (sacrebleu's clipping and closest-reference rule),
a hypothesis list at a time, into sacrebleu's ``compute_bleu``, so the score is identical.

Prompts with no gold translation have no references and contribute nothing (sacrebleu cannot score
a segment without references either). A prompt with references but no hypothesis (an empty list, or
none in the file) is one empty segment: what sacrebleu scores for a system that output an empty
line, so that a missing prompt costs BLEU its references' length in the brevity penalty, as it
costs MAP and wF1 a zero, rather than dropping out of the corpus.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from sacrebleu.metrics.bleu import BLEU, BLEUSignature

from ..data import GoldPrompt, InputError
from ..prompt import Judged
from .base import Metric
from .registry import Param, register

ALL = None  # x or y of "all"
#: sacrebleu's options, passed through (each name less ``bleu_`` is the :class:`BleuEngine` argument)
SETTINGS = (
    Param("bleu_tokenize", str, "13a", f"sacrebleu tokenizer for BLEU: {', '.join(BLEU.TOKENIZERS)}",
          choices=tuple(BLEU.TOKENIZERS), metavar="TOKENIZER"),
    Param("bleu_lowercase", bool, False, "lowercase before BLEU"),
    Param("bleu_smooth_method", str, "exp", f"sacrebleu smoothing for BLEU: {', '.join(BLEU.SMOOTH_DEFAULTS)}",
          choices=tuple(BLEU.SMOOTH_DEFAULTS), metavar="METHOD"),
    Param("bleu_smooth_value", float, None, "the value of BLEU's floor or add-k smoothing (default: sacrebleu's: "
          + ", ".join(f"{method} {value}" for method, value in BLEU.SMOOTH_DEFAULTS.items() if value is not None)
          + ")", metavar="VALUE", valid=("finite and >= 0", lambda value: 0 <= value < math.inf)))


def parse_count(text: str) -> Optional[int]:
    return ALL if text == "all" else int(text)


def top_references(prompt: GoldPrompt, y: Optional[int]) -> List[str]:
    """The y highest-weight gold translations, raw text; ties keep file order (stable sort)."""
    ranked = sorted(prompt.translations, key=lambda tw: -tw[1])
    return [text for text, _ in ranked[:y]]


class Fast13a:
    """sacrebleu's ``13a`` tokenizer, the same function, faster. sacrebleu pads every character of a
    class with spaces (rule 1), then '.' and ',' next to non-digits (rules 2, 3), then '-' after a
    digit (rule 4), each a ``re.sub`` with a group template, which Python 3.11 expands in Python for
    every match (every space matches rule 1).

    A line without an ASCII digit (most lines of a gold) takes one ``re.findall``: there rule 4 never
    applies, and rules 2 and 3 pad every '.' and ',' (rule 2 leaves a space before each; so no two
    are adjacent for rule 3, which pads each one it reaches, and it reaches them all); the rules only
    insert spaces and the result is whitespace-normalized, so its tokens are each padded character
    alone and the maximal runs of the other non-whitespace characters (``\\s`` is ``str.split``'s
    whitespace, which a test checks on every code point). Other lines get rule 1 as ``str.translate``
    (the same mapping, in C) and sacrebleu's own rules 2-4. :func:`fast_tokenizer` uses this class only
    where sacrebleu's rules are the ones this mirrors."""

    RULES = [(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "), (r"([^0-9])([\.,])", r"\1 \2 "),
             (r"([\.,])([^0-9])", r" \1 \2"), (r"([0-9])(-)", r"\1 \2 ")]

    def __init__(self):
        first = re.compile(self.RULES[0][0])
        self.table = {code: f" {chr(code)} " for code in range(0x80) if first.fullmatch(chr(code))}
        self.rules = [(re.compile(pattern), replacement) for pattern, replacement in self.RULES[1:]]
        padded = re.escape("".join(chr(code) for code in self.table if not chr(code).isspace()) + ".,")
        self.digit_free_tokens = re.compile(f"[^\\s{padded}]+|\\S").findall
        self.has_digit = re.compile("[0-9]").search
        self.plain = re.compile("[<\n&0-9]").search  # None: digit-free, nothing to drop or unescape

    def __call__(self, line: str) -> str:
        if self.plain(line) is None:  # most lines: one scan, then the digit-free tokens
            return " ".join(self.digit_free_tokens(line))
        if "<" in line or "\n" in line:  # else these are no-ops
            line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
        if "&" in line:
            line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
        if self.has_digit(line) is None:
            return " ".join(self.digit_free_tokens(line))
        line = f" {line} ".translate(self.table)
        for rule, replacement in self.rules:
            line = rule.sub(replacement, line)
        return " ".join(line.split())


def fast_tokenizer(bleu: BLEU):
    """``bleu``'s tokenizer, or :class:`Fast13a` where that is provably the same function."""
    tokenizer = bleu.tokenizer
    rules = getattr(getattr(tokenizer, "_post_tokenizer", None), "_re", None)
    if tokenizer.signature() == "13a" and rules == [(re.compile(p), r) for p, r in Fast13a.RULES]:
        return Fast13a()
    return tokenizer


def word_ngrams(line: str, max_order: int) -> Tuple[Counter, int]:
    """sacrebleu's ``extract_all_word_ngrams(line, 1, max_order)``: the same Counter (tuple keys, in the
    same order) and length, faster: zip over the token list shifted builds the tuples and Counter counts
    them in C, where sacrebleu slices and builds each tuple in a Python loop."""
    tokens = line.split()
    shifted = [tokens[i:] for i in range(max_order)]
    return Counter(chain.from_iterable(zip(*shifted[:n]) for n in range(1, max_order + 1))), len(tokens)


def repeated_ngrams(token_lists: List[List[str]], max_order: int) -> Iterator[Tuple[tuple, int]]:
    """(n-gram, count) for each n-gram, n = 1..max_order, that one of ``token_lists`` repeats. Counted
    in C per order over all lists at once, keyed by (list number, *n-gram), and only in the lists with
    at least n more tokens than distinct tokens: no other list can repeat an n-gram (its two
    occurrences d apart cover n + min(d, n) positions, with at most min(d, n) distinct tokens)."""
    surplus = [len(tokens) - len(set(tokens)) for tokens in token_lists]
    for n in range(1, max_order + 1):
        candidates = [tokens for tokens, more in zip(token_lists, surplus) if more >= n]
        if not candidates:
            return
        shifted = [map(itemgetter(slice(i, None)), candidates) for i in range(n)]
        keys = chain.from_iterable(map(zip, map(repeat, range(len(candidates))), *shifted))
        yield from ((key[1:], count) for key, count in Counter(keys).items() if count > 1)


class BoundedCache:
    """A memo of ``compute`` over strings, bounded: two generations of at most ``size`` entries; an
    entry used in the last generation survives the next turnover. It keeps tokenized hypotheses
    (they repeat a lot from one validation or checkpoint to the next) and references (shared by
    every BLEU variant): its size, not the data, bounds its memory."""

    def __init__(self, compute, size: int = 1 << 16):
        self.compute, self.size = compute, size
        self.new: Dict[str, str] = {}
        self.old: Dict[str, str] = {}

    def clear(self) -> None:
        self.new, self.old = {}, {}

    def __call__(self, text: str) -> str:
        found = self.new.get(text)
        if found is None:
            found = self.old.get(text)
            if found is None:
                found = self.compute(text)
            if len(self.new) >= self.size:
                self.old, self.new = self.new, {}
            self.new[text] = found
        return found


class BleuEngine:
    """sacrebleu's BLEU with per-prompt reference statistics and per-string segment statistics
    cached across calls."""

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> BleuEngine:
        """The engine of a scorer's settings (its ``bleu_*`` parameters)."""
        return cls(**{param.name.removeprefix("bleu_"): settings[param.name] for param in SETTINGS})

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
        self.tokenizer = fast_tokenizer(self.bleu)
        self.tokenized = BoundedCache(self.preprocess)
        self._references: Dict[GoldPrompt, Dict[Optional[int], Optional[dict]]] = {}  # prompt -> y -> info

    def preprocess(self, text: str) -> str:
        """sacrebleu's ``_preprocess_segment``: lowercase (optionally), strip the end, tokenize."""
        if self.bleu.lowercase:
            text = text.lower()
        return self.tokenizer(text.rstrip())

    def segment(self, text: str) -> Tuple[dict, int]:
        """sacrebleu's n-gram counts and length of ``text`` once preprocessed."""
        return word_ngrams(self.tokenized(text), self.bleu.max_ngram_order)

    def reference_info(self, prompt: GoldPrompt, y: Optional[int]) -> Optional[dict]:
        """sacrebleu's ``_extract_reference_info`` of the top-y translations (n-gram counts, max over
        references, and lengths), or None without references."""
        by_y = self._references.setdefault(prompt, {})
        if y not in by_y:
            segments = [self.segment(r) for r in top_references(prompt, y)]
            info = None
            if segments:
                merged = dict(segments[0][0])
                for ngrams, _ in segments[1:]:
                    for ngram, count in ngrams.items():
                        if count > merged.get(ngram, 0):
                            merged[ngram] = count
                info = {"ref_ngrams": merged, "ref_words": {g[0] for g in merged if len(g) == 1},
                        "ref_lens": [length for _, length in segments], "closest": {}}
            by_y[y] = info
        return by_y[y]

    def release(self, prompt: GoldPrompt) -> None:
        """Forget ``prompt``'s reference statistics (a prompt that will not be scored again)."""
        self._references.pop(prompt, None)

    def segment_stats(self, texts: Sequence[str], prompt: GoldPrompt, y: Optional[int]) -> List[int]:
        """Summed segment statistics [sys_len, ref_len, correct_1..N, total_1..N] of the raw hypotheses
        ``texts``, as sacrebleu's ``_compute_segment_statistics`` gives them, computed for the whole
        list at once, mostly in C. Lengths and totals come from how many hypotheses have each length
        (an L-token one has max(0, L-n+1) n-grams; the closest reference length is computed once per
        L). sacrebleu's correct_n, the sum over a hypothesis' n-grams g of min(count of g, count of g
        in the references), is the number of its n-gram occurrences found in the references, less
        count - reference count for each g it repeats more often than the references."""
        order = self.bleu.max_ngram_order
        stats = [0] * self.num_stats
        info = self.reference_info(prompt, y)
        if info is None:
            return stats
        ref_ngrams, closest = info["ref_ngrams"], info["closest"]
        tokens = list(map(str.split, map(self.tokenized, texts)))
        for length, hyps in Counter(map(len, tokens)).items():
            if length not in closest:
                closest[length] = self.bleu._get_closest_ref_len(length, info["ref_lens"])
            stats[0] += hyps * length
            stats[1] += hyps * closest[length]
            for n in range(min(order, length)):
                stats[2 + order + n] += hyps * (length - n)
        # every hypothesis' tokens in one list, each ended by None: zipped with itself shifted, it gives
        # their n-grams, and n-grams across two hypotheses, which have None and so no reference has
        flat = list(chain.from_iterable(map(chain, tokens, repeat((None,)))))
        shifted = [flat[i:] for i in range(order)]
        stats[2] += sum(map(info["ref_words"].__contains__, flat))  # unigrams: no 1-tuples to build
        for n in range(2, order + 1):
            stats[1 + n] += sum(map(ref_ngrams.__contains__, zip(*shifted[:n])))
        for ngram, count in repeated_ngrams(tokens, order):
            excess = count - ref_ngrams.get(ngram, count)  # none where the references lack it
            if excess > 0:
                stats[1 + len(ngram)] -= excess
        return stats

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
        # sacrebleu's own names and forms for its options (references vary per prompt: "var")
        info = BLEUSignature({**vars(engine.bleu), "num_refs": -1}).info
        self.options = {name: str(info[name]) for name in ("tok", "case", "smooth")}

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        """The segment statistics of the top x hypotheses; an empty list is one empty hypothesis. A list
        shorter than x is not padded (x is at most, as in the paper's 100-best lists), so neither is
        this one: it weighs as a one-line output, for any x and for ``all``."""
        texts = [h.text for h in judged.hyps[: self.x]] or [""]
        stats = self.engine.segment_stats(texts, judged.gold.prompt, self.y)
        return dict(zip(self.stat_names, map(float, stats)))

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        return self.engine.score([stats.get(n, 0.0) for n in self.stat_names])


register("bleu_{x}x{y}", XYBleu.PATTERN.pattern,
         "BLEU of each prompt's top x hypotheses against its y highest-weight translations (x, y: a count or "
         "`all`): equals sacrebleu's `corpus_bleu` on that pseudo-corpus, 0-100", SETTINGS)(
    lambda match, options: XYBleu(match.group(0), options.bleu()))
