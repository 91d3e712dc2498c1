"""Holm's step-down correction: the family-wise error over several systems compared with one baseline."""

from __future__ import annotations

from typing import List, Optional, Sequence

from ..data import InputError

DEFAULT_ALPHA = 0.05


def holm(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's step-down adjusted p-values (None stays None and is not counted among the tests)."""
    bad = next((p for p in p_values if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))
                                                          or not 0 <= p <= 1)), None)
    if bad is not None:
        raise InputError(f"a p-value must be a number in [0, 1] or None, got {bad!r:.60}")
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        adjusted[i] = running
    return adjusted

