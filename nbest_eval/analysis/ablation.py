"""Gold-completeness study (paper section 3.2, after Zobel 1998): would fewer valid translations
rank the systems the same way?

For each fraction f, every prompt keeps its ceil(f * n) highest-weight translations (n = its
translation lines; ties in weight keep file order; the kept lines stay in file order, so at f = 1
the gold is unchanged). Every system is rescored against each ablated gold, and the ranking under
it is correlated with the ranking under the full gold (the reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from ..data import Gold, GoldPrompt, InputError
from ..scorer import Scorer
from .agreement import agreement, check_coefficients
from .systems import Run, SystemTable, score_systems

FRACTIONS = tuple(k / 10 for k in range(1, 11))
COEFFICIENTS = ("spearman", "pearson_rank")


def kept_count(fraction: float, n: int) -> int:
    # the epsilon keeps 0.3 * 10 (= 3.0000000000000004) from rounding up to 4
    return min(n, math.ceil(fraction * n - 1e-9))


def ablate_gold(gold: Gold, fraction: float) -> Gold:
    """The gold with each prompt cut to its ceil(fraction * n) most frequent translations.

    Prompts are new :class:`GoldPrompt` objects, so a scorer's per-prompt caches never mix them up
    with the full gold's; a scorer per ablated gold lets each cache go once that gold is scored.
    """
    if not 0 < fraction <= 1:
        raise InputError(f"a fraction must be in (0, 1], got {fraction}")
    prompts = []
    for prompt in gold:
        ranked = sorted(range(len(prompt.translations)), key=lambda i: -prompt.translations[i][1])
        keep = sorted(ranked[: kept_count(fraction, len(ranked))])
        prompts.append(GoldPrompt(prompt.id, prompt.text, tuple(prompt.translations[i] for i in keep)))
    return Gold(prompts, gold.path)


@dataclass
class Ablation:
    """Scores under the full gold and each ablated one, and agreement with the full-gold ranking."""

    metrics: List[str]
    full: SystemTable
    #: fraction -> the systems scored against that ablated gold
    tables: Dict[float, SystemTable]
    #: fraction -> metric -> coefficient -> value (plus "n")
    agreement: Dict[float, Dict[str, Dict[str, Optional[float]]]]
    #: fraction -> translation lines kept over all prompts
    kept: Dict[float, int]

    def to_json(self) -> dict:
        return {
            "metrics": self.metrics,
            "systems": self.full.names,
            "full": {s.name: s.values for s in self.full.systems},
            "fractions": [{"fraction": f, "translations_kept": self.kept[f],
                           "scores": {s.name: s.values for s in self.tables[f].systems},
                           "agreement": self.agreement[f]} for f in self.tables],
        }


def ablate(gold: Gold, runs: Sequence[Run], make_scorer: Callable[[], Scorer],
           fractions: Sequence[float] = FRACTIONS, coefficients: Sequence[str] = COEFFICIENTS) -> Ablation:
    """Score (name, path, n-best) runs against the full gold and each ablated gold.

    ``make_scorer`` gives a fresh scorer per gold (see :func:`ablate_gold`); its metrics are the
    ones studied. Fewer than two runs is an error: one system has no ranking.
    """
    if len(runs) < 2:
        raise InputError(f"the ablation compares system rankings: give at least 2 n-best files, got {len(runs)}")
    check_coefficients(coefficients)
    scorer = make_scorer()
    full = score_systems(scorer, gold, runs)
    tables, agreements, kept = {}, {}, {}
    for fraction in sorted(set(fractions)):
        cut = ablate_gold(gold, fraction)
        kept[fraction] = sum(len(p.translations) for p in cut)
        tables[fraction] = score_systems(make_scorer(), cut, runs)
        agreements[fraction] = {key: agreement(full.column(key), tables[fraction].column(key), coefficients,
                                                   (key, key))
                                for key in scorer.keys}
    return Ablation(scorer.keys, full, tables, agreements, kept)
