"""trec_eval's summary statistics: ``num_ret``, ``num_rel``, ``num_rel_ret``.

Sums over the prompts, not means (trec_eval: "summary figure is sum of individual topics"), over
the prompts with R > 0 as trec_eval (with ``-c``) and MAP count them; of the deduplicated list
that the ranking measures rank, untruncated (``--wf1-*`` cut the F1 family's set, not the run).
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping

import numpy as np

from ..prompt import Judged
from .base import Metric
from .registry import register


class Count(Metric):
    """The sum over prompts with R > 0 of a per-prompt count."""

    def __init__(self, key: str, per_prompt: Callable[[Judged], int]):
        self.key, self.per_prompt = key, per_prompt
        self.stat_names = (key,)

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        return {self.key: float(self.per_prompt(judged)) if judged.R > 0 else 0.0}

    def value(self, stats: Mapping[str, float]) -> float:
        return stats.get(self.key, 0.0)

    def values(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(columns[self.key], dtype=float).copy()


COUNTS = {
    "num_ret": ("hypotheses returned: distinct ones", lambda j: len(j.rel)),
    "num_rel": ("valid translations there are (R)", lambda j: j.R),
    "num_rel_ret": ("valid translations returned", lambda j: sum(j.rel)),
}
for _key, (_what, _count) in COUNTS.items():
    register(_key, None, f"{_what}, summed over the prompts with valid translations, not a mean (trec_eval "
             f"`{_key}`)", higher_is_better=None)(lambda match, options, count=_count: Count(match.group(0), count))
