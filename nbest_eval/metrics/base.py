"""The metric protocol: per-prompt statistics in, one value out."""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Tuple

from ..prompt import Judged

#: statistics every scorer keeps: prompts seen, prompts with R > 0, prompts with an empty list
N_PROMPTS, N_REL, N_EMPTY = "n_prompts", "n_rel", "n_empty"


class Metric:
    """A metric named ``key``: ``prompt_stats`` gives additive sums, ``value`` turns sums into a score.

    ``value`` returns None when the score is undefined (e.g. no prompt counted).
    """

    key: str
    stat_names: Tuple[str, ...]
    #: the statistic counting the prompts averaged over, for metrics with their own eligibility rule
    count_name: Optional[str] = None

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        raise NotImplementedError

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        raise NotImplementedError


class PromptMean(Metric):
    """The mean of a per-prompt value over all prompts, or over prompts with R > 0 (``over=N_REL``)."""

    def __init__(self, key: str, per_prompt: Callable[[Judged], float], over: str = N_PROMPTS):
        self.key, self.per_prompt, self.over = key, per_prompt, over
        self.stat_names = (key,)

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        if self.over == N_REL and judged.R == 0:
            return {self.key: 0.0}
        return {self.key: float(self.per_prompt(judged))}

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        count = stats.get(self.over, 0.0)
        return stats.get(self.key, 0.0) / count if count else None
