"""The metric protocol: per-prompt statistics in, one value out."""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from ..prompt import Judged

#: statistics every scorer keeps: prompts seen, prompts with R > 0, prompts with an empty list, hypotheses
N_PROMPTS, N_REL, N_EMPTY, N_HYPS = "n_prompts", "n_rel", "n_empty", "n_hyps"


class Metric:
    """A metric named ``key``: ``prompt_stats`` gives additive sums, ``value`` turns sums into a score.

    ``value`` returns None when the score is undefined (e.g. no prompt counted). A metric that is the
    mean of a per-prompt value sets ``mean_of`` = (the values' sum, the count of prompts averaged
    over): ``value`` and ``values`` follow from it, and paired t-tests can use the per-prompt values.
    """

    key: str
    stat_names: Tuple[str, ...]
    #: the statistic counting the prompts averaged over, for metrics with their own eligibility rule
    count_name: Optional[str] = None
    #: (sum statistic, count statistic) of a mean over prompts; None for other measures (BLEU)
    mean_of: Optional[Tuple[str, str]] = None
    #: what the value depends on besides the key and the data (tokenizer, truncation...), for signatures
    options: Mapping[str, str] = {}

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        raise NotImplementedError

    def value(self, stats: Mapping[str, float]) -> Optional[float]:
        if self.mean_of is None:
            raise NotImplementedError(f"{type(self).__name__} gives neither value() nor mean_of")
        total, count = (stats.get(name, 0.0) for name in self.mean_of)
        return total / count if count else None

    def values(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """``value`` of many sums at once (``columns``: statistic name -> one sum per resample), nan
        where undefined; vectorized for means, one ``value`` call per row otherwise."""
        if self.mean_of is not None:
            total, count = (columns[name] for name in self.mean_of)
            return np.divide(total, count, out=np.full(len(count), np.nan), where=count != 0)
        rows = zip(*(columns[name].tolist() for name in self.stat_names))
        values = (self.value(dict(zip(self.stat_names, row))) for row in rows)
        return np.array([np.nan if v is None else v for v in values], dtype=float)


class PromptMean(Metric):
    """The mean of a per-prompt value over all prompts, or over prompts with R > 0 (``over=N_REL``)."""

    def __init__(self, key: str, per_prompt: Callable[[Judged], float], over: str = N_PROMPTS,
                 options: Mapping[str, str] = {}):
        self.key, self.per_prompt, self.over = key, per_prompt, over
        self.stat_names = (key,)
        self.mean_of = (key, over)
        self.options = dict(options)

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        if self.over == N_REL and judged.R == 0:
            return {self.key: 0.0}
        return {self.key: float(self.per_prompt(judged))}
