"""User-oriented measures (Baeza-Yates and Ribeiro-Neto, Modern Information Retrieval, 3.2.2):
what a list gives a learner who already knows some of the valid translations.

"Known" (U) is a prompt's most frequent learner translations: its ``--known-top`` N (3 when neither
option is given) highest-weight ones, or those with at least ``--known-threshold`` TAU of the total
weight of its distinct normalized translations. Over
the answer list A (the deduplicated keys of the list that ``--wf1-top`` / ``--wf1-threshold``
keep, as the F1 family's) and the gold set V:

- ``coverage`` = |A & U| / |U|: the known translations the list contains;
- ``novelty`` = |A & (V - U)| / |A & V|: of the valid translations it contains, those not known;
- ``relative_recall`` = min(1, |A & V| / |U|): valid ones found against the |U| a learner expects;
- ``recall_effect`` (the textbook's "recall effort") = |U| / (the rank of A's |U|-th valid key):
  the expected count over the hypotheses read to find it, 0 when A never holds that many.

Each is the mean over the prompts where it is defined (|U| > 0; for novelty |A & V| > 0), whose
count the scorer reports, as for the preference correlations.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Set

from ..prompt import Judged, PromptGold
from .base import Metric
from .f_measure import answer
from .registry import Param, register
from .staple_f1 import TRUNCATION, truncation_label

#: the known set when neither --known-top nor --known-threshold is given: the top 3 (docs/metrics.md says why)
KNOWN_TOP = 3
KNOWN = (
    Param("known_top", int, None, "user-oriented measures: the translations a learner knows are the prompt's N "
          f"highest-weight ones (ties keep the gold's order); the top {KNOWN_TOP} when neither this nor "
          "--known-threshold is given", metavar="N", valid=(">= 1", lambda n: n >= 1), exclusive="known"),
    Param("known_threshold", float, None, "user-oriented measures: the translations a learner knows are those "
          "with at least TAU of the total weight of the prompt's distinct normalized translations (in place of "
          "--known-top)", metavar="TAU", valid=("in (0, 1]", lambda tau: 0 < tau <= 1), exclusive="known"))
#: the statistic counting the prompts with a known translation (coverage, relative recall, recall effect)
N_KNOWN = "known:n"


def known(gold: PromptGold, top: int, threshold: Optional[float]) -> Set[str]:
    """The keys of the translations a learner knows (U)."""
    if threshold is None:
        return set(sorted(gold.weights, key=lambda k: -gold.weights[k])[:top])  # stable sort: file order on ties
    weights = gold.weights
    if math.isinf(gold.total_weight):  # finite weights near the float maximum: their shares do not overflow
        largest = max(weights.values())
        weights = {k: w / largest for k, w in weights.items()}
    total = sum(weights.values())
    return {k for k, w in weights.items() if total > 0 and w / total >= threshold}


def coverage(found: List[str], valid: Set[str], knows: Set[str]) -> Optional[float]:
    return len(knows.intersection(found)) / len(knows) if knows else None


def novelty(found: List[str], valid: Set[str], knows: Set[str]) -> Optional[float]:
    hits = valid.intersection(found)
    return len(hits - knows) / len(hits) if hits else None


def relative_recall(found: List[str], valid: Set[str], knows: Set[str]) -> Optional[float]:
    return min(1.0, len(valid.intersection(found)) / len(knows)) if knows else None


def recall_effect(found: List[str], valid: Set[str], knows: Set[str]) -> Optional[float]:
    if not knows:
        return None
    ranks = [i for i, key in enumerate(found, 1) if key in valid]
    return len(knows) / ranks[len(knows) - 1] if len(ranks) >= len(knows) else 0.0


class UserMeasure(Metric):
    """The mean of one of the functions above over the prompts where it is defined (not None)."""

    def __init__(self, key: str, options):
        self.key, self.measure = key, MEASURES[key][1]
        self.top, self.threshold = options.wf1_top, options.wf1_threshold
        self.known_threshold = options.known_threshold
        self.known_top = options.known_top or (KNOWN_TOP if self.known_threshold is None else None)
        self.count_name = N_KNOWN if key != "novelty" else "novelty:n"
        self.stat_names = self.mean_of = (key, self.count_name)
        knows = f"thr{self.known_threshold!r}" if self.known_threshold is not None else f"top{self.known_top}"
        self.options = {"known": knows, "trunc": truncation_label(options)}

    def prompt_stats(self, judged: Judged) -> Dict[str, float]:
        knows = known(judged.gold, self.known_top, self.known_threshold)
        value = self.measure(answer(judged, self.top, self.threshold), set(judged.gold.weights), knows)
        return {self.key: 0.0, self.count_name: 0.0} if value is None else {self.key: value, self.count_name: 1.0}


MEASURES = {
    "coverage": ("coverage ratio: the share of the known translations (`--known-top` / `--known-threshold`) "
                 "that the list contains", coverage),
    "novelty": ("novelty ratio: the share of the valid translations in the list that are not known; over "
                "prompts whose list has one", novelty),
    "relative_recall": ("relative recall: valid translations in the list per known one, at most 1", relative_recall),
    "recall_effect": ("recall effort: the known count over the hypotheses read until as many valid ones are found, "
                      "0 if never", recall_effect),
}
for _key, (_help, _) in MEASURES.items():
    register(_key, None, _help, KNOWN + TRUNCATION)(lambda match, options: UserMeasure(match.group(0), options))
