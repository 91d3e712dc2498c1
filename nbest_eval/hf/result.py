"""The result of one n-best evaluation, and its Trainer-style metrics."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from ..data import NBest
from ..scorer import GEN_SECONDS, NBEST_OVERHEAD, PROMPTS, SCORE_SECONDS
from ..significance import PerPrompt
from ..stats import Stats


@dataclasses.dataclass
class NBestResult:
    """One evaluation: metric values and summed statistics (identical on every rank), timings.

    ``gen_s`` / ``score_s`` (seconds generating / scoring, which runs beside generation) and
    ``overhead_s`` (the evaluation's wall time beyond generation) are the slowest rank's. ``nbest``
    holds every prompt's list, in prompt order, when the evaluation was asked to gather them (on
    rank 0 only). ``per_prompt`` holds every prompt's statistics (identical on every rank), which
    an early-stopping rule resamples.
    """

    values: Dict[str, Optional[float]]
    stats: Stats
    gen_s: float
    score_s: float
    n_prompts: int
    nbest: Optional[NBest] = None
    overhead_s: float = 0.0
    per_prompt: Optional[PerPrompt] = None

    def metrics(self, prefix: str = "eval", name: Optional[str] = None) -> Dict[str, float]:
        """Trainer-style metrics: ``{prefix}_{key}`` (``{prefix}_{name}_{key}`` with ``name``).

        An undefined value (None, e.g. a preference correlation with no prompt counted) is given as
        0.0, as the fairseq task logs it: every key is present at every evaluation, so
        ``metric_for_best_model`` always finds its value (``values`` keeps the None).
        Beside them, the keys the fairseq task logs: ``{head}nbest_gen_s``, ``{head}nbest_score_s``,
        ``{head}nbest_overhead_s`` and ``{head}nbest_prompts``.
        """
        head = f"{prefix}_{name}_" if name else f"{prefix}_"
        out = {head + key: 0.0 if value is None else float(value) for key, value in self.values.items()}
        out[head + GEN_SECONDS] = round(self.gen_s, 4)
        out[head + SCORE_SECONDS] = round(self.score_s, 4)
        out[head + NBEST_OVERHEAD] = round(self.overhead_s, 4)
        out[head + PROMPTS] = float(self.n_prompts)
        return out
