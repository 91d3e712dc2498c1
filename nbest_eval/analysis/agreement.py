"""How far two measures agree on the ranking of systems (paper sections 3.2 and 5).

Every coefficient takes one score per system under a reference measure ``x`` and another measure
``y`` (higher is better) and returns a value in [-1, 1], or None where it is undefined (a measure
that gives every system the same score). The asymmetric ones weigh agreement near the head of a
ranking more: tau_AP walks y's ranking (the estimate of the reference's), Pearson Rank x's.
:func:`agreement` given the measures' keys first turns a lower-is-better one (the error rate
``e{b}``) so that higher is better, as the metric registry declares: E then agrees with F, and the
head weighed is its best systems, not its worst.

- ``spearman``, ``kendall``: :func:`scipy.stats.spearmanr` and :func:`scipy.stats.kendalltau`
  (tau-b, which corrects for ties).
- ``tau_ap`` (Yilmaz, Aslam and Robertson 2008): order the systems by y, best first;
  tau_AP = 2/(N-1) * sum_{i=2..N} C(i)/(i-1) - 1, where C(i) counts the systems above position i
  that the reference x also ranks strictly above system i.
- ``pearson_rank`` (Gao, Bagdouri and Oard 2016), as the ``diffir`` package computes it (see
  :func:`pearson_rank`); ``pearson_rank_sym`` averages PR(x, y) and PR(y, x).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..data import InputError
from ..metrics import higher_is_better, is_metric_key

Scores = Sequence[float]


def _defined(x: Scores, y: Scores) -> bool:
    """Every coefficient needs both measures to tell at least two systems apart."""
    return len(set(x)) > 1 and len(set(y)) > 1


def spearman(x: Scores, y: Scores) -> Optional[float]:
    from scipy import stats  # here: scipy costs ~0.5 s to import

    return float(stats.spearmanr(x, y).statistic) if _defined(x, y) else None


def kendall(x: Scores, y: Scores) -> Optional[float]:
    from scipy import stats

    return float(stats.kendalltau(x, y).statistic) if _defined(x, y) else None


def tau_ap(x: Scores, y: Scores) -> Optional[float]:
    """AP correlation of y with the reference x: Yilmaz et al.'s tau_AP with x as the true ranking
    and y as the estimate. Systems are walked in y's order, so a mistake near the head of y's
    ranking costs most; equals ``pyircor.tauap(x, y)`` on tie-free input.

    Ties, as in one direction of Urbano and Marrero's tau_AP_b (2017, "The Treatment of Ties in AP
    Correlation"): systems tied under y form one group; a system is compared only with the
    p systems in strictly better groups, its term is C/p, and the sum is normalized by the number of
    systems outside the top group instead of N-1. A pair that x ties does not count as agreeing.
    Without ties this is exactly the formula above, and tau_ap(x, x) is 1 with or without ties.
    """
    if not _defined(x, y):
        return None
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    total, counted = 0.0, 0
    for i in range(len(ys)):
        above = ys > ys[i]
        if above.any():
            total += np.count_nonzero(xs[above] > xs[i]) / np.count_nonzero(above)
            counted += 1
    return 2.0 * total / counted - 1.0


def pearson_rank(x: Scores, y: Scores) -> Optional[float]:
    """Pearson Rank of y with x, in the ``diffir`` package's formulation (TopkMeasure.pearson_rank).

    Min-max normalize x and y to [0, 1]; order the systems by x, best first (ties keep input
    order); for each position i >= 2 take the Pearson-like correlation of the gaps to every system
    above it, r_i = sum_{j<i} (x_i-x_j)(y_i-y_j) / sqrt(sum_{j<i} (x_i-x_j)^2 * sum_{j<i} (y_i-y_j)^2)
    (0 where a sum of squares is 0, as in diffir); PR = sum_{i>=2} x_i r_i / sum_{i>=2} x_i.
    Weighting by the normalized score x_i makes it head-weighted and gap-sensitive; the worst
    system has weight 0, so with two systems PR is undefined (None).
    """
    if not _defined(x, y):
        return None
    xs, ys = (np.asarray(v, dtype=float) for v in (x, y))
    xs, ys = ((v - v.min()) / (v.max() - v.min()) for v in (xs, ys))
    order = np.argsort(-xs, kind="stable")
    xs, ys = xs[order], ys[order]
    weight = xs[1:].sum()
    if weight == 0:
        return None
    total = 0.0
    for i in range(1, len(xs)):
        dx, dy = xs[i] - xs[:i], ys[i] - ys[:i]
        norm = math.sqrt(float(dx @ dx) * float(dy @ dy))
        if norm > 0:
            total += xs[i] * float(dx @ dy) / norm
    return total / weight


def pearson_rank_sym(x: Scores, y: Scores) -> Optional[float]:
    """(PR(x, y) + PR(y, x)) / 2, the symmetric form diffir uses; None if either is undefined."""
    forward, backward = pearson_rank(x, y), pearson_rank(y, x)
    return None if forward is None or backward is None else (forward + backward) / 2


COEFFICIENTS: Dict[str, Callable[[Scores, Scores], Optional[float]]] = {
    "spearman": spearman, "kendall": kendall, "tau_ap": tau_ap,
    "pearson_rank": pearson_rank, "pearson_rank_sym": pearson_rank_sym,
}
#: the coefficients that ``compare`` and ``ablate`` report by default
DEFAULT_COEFFICIENTS = ("spearman", "kendall", "tau_ap", "pearson_rank")


def check_coefficients(names: Sequence[str]) -> List[str]:
    unknown = [n for n in names if n not in COEFFICIENTS]
    if unknown:
        raise InputError(f"unknown coefficient {unknown[0]!r}; choose from {', '.join(COEFFICIENTS)}")
    return list(names)


def _bounded(value: Optional[float]) -> Optional[float]:
    """A coefficient in [-1, 1]: rounding can take a perfect agreement to 1.0000000000000002."""
    return None if value is None else min(1.0, max(-1.0, value))


def paired(x: Sequence[Optional[float]], y: Sequence[Optional[float]]) -> Tuple[List[float], List[float]]:
    """The systems that have a value under both measures (None marks an undefined value)."""
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    return [a for a, _ in pairs], [b for _, b in pairs]


def better_up(key: str, values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """The values of the measure ``key`` turned so that a higher one is better: negated for a
    lower-is-better measure. A count (no direction) and a column that is no metric key (a systems
    table may hold any) are taken as they are."""
    lower = is_metric_key(key) and higher_is_better(key) is False
    return [None if v is None else -v if lower else v for v in values]


def agreement(x: Sequence[Optional[float]], y: Sequence[Optional[float]],
              coefficients: Sequence[str] = DEFAULT_COEFFICIENTS,
              keys: Optional[Tuple[str, str]] = None) -> Dict[str, Optional[float]]:
    """Each coefficient of y against the reference x over the systems defined under both, plus
    ``n``, how many systems that was (every coefficient is None when fewer than 2). ``keys``: the
    measures of x and y, each ranked in its own better direction (:func:`better_up`); without them
    both are taken as higher-is-better."""
    if keys is not None:
        x, y = better_up(keys[0], x), better_up(keys[1], y)
    xs, ys = paired(x, y)
    names = check_coefficients(coefficients)
    result = {name: _bounded(COEFFICIENTS[name](xs, ys)) if len(xs) > 1 else None for name in names}
    result["n"] = len(xs)
    return result
