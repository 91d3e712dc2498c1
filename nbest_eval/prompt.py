"""Per-prompt views shared by all metrics: the normalized gold set and the judged n-best list.

:class:`PromptGold` is built once per gold prompt and cached by the scorer; :class:`Judged` is built
once per (prompt, n-best list) and computes each derived view (dedup, relevance, gains) only when
a metric first asks for it.
"""

from __future__ import annotations

import unicodedata
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple

from .data import GoldPrompt, Hyp


class _DropPunctuation(dict):
    """A ``str.translate`` table that deletes Unicode punctuation (categories P*), filled lazily so
    that each distinct character's category is looked up once per process."""

    def __missing__(self, codepoint: int) -> Optional[int]:
        self[codepoint] = None if unicodedata.category(chr(codepoint)).startswith("P") else codepoint
        return self[codepoint]


_DROP_PUNCTUATION = _DropPunctuation()


def norm(text: str) -> str:
    """The official STAPLE 2020 scorer's key: strip, lowercase, drop Unicode punctuation (P*).

    Inner whitespace is kept as is, exactly as the official scorer does.
    """
    return text.strip().lower().translate(_DROP_PUNCTUATION)


class PromptGold:
    """A gold prompt's normalized key -> weight map (later duplicates overwrite, as in the scorer)."""

    def __init__(self, prompt: GoldPrompt):
        self.prompt = prompt
        self.weights: Dict[str, float] = {}
        for text, weight in prompt.translations:
            self.weights[norm(text)] = weight
        self.num_valid = len(self.weights)
        self.total_weight = sum(self.weights.values())
        self.ideal_gains: List[float] = sorted(self.weights.values(), reverse=True)


class Judged:
    """An n-best list judged against one prompt's gold."""

    def __init__(self, gold: PromptGold, hyps: Sequence[Hyp]):
        self.gold = gold
        self.hyps = list(hyps)

    @property
    def R(self) -> int:
        return self.gold.num_valid

    @cached_property
    def unique(self) -> List[Tuple[str, Hyp]]:
        """(key, hyp) for the first hypothesis of each normalized key, in rank order."""
        seen, out = set(), []
        for hyp in self.hyps:
            key = norm(hyp.text)
            if key not in seen:
                seen.add(key)
                out.append((key, hyp))
        return out

    @cached_property
    def rel(self) -> List[int]:
        """Binary relevance of the deduplicated list."""
        return [1 if key in self.gold.weights else 0 for key, _ in self.unique]

    @cached_property
    def gains(self) -> List[float]:
        """Graded gain (gold weight, 0 if invalid) of the deduplicated list."""
        return [self.gold.weights.get(key, 0.0) for key, _ in self.unique]
