"""How the results of ``select``, ``compare`` and ``score`` write a number: one place, so that a
value reads alike in every table (the CLI's and the results' own ``to_text``)."""

from __future__ import annotations

from typing import Optional

from ..metrics.counts import COUNTS
from ..significance import Interval


def format_value(value: Optional[float]) -> str:
    """4 decimals; an integer (a count) as it is."""
    return "n/a" if value is None else str(value) if isinstance(value, int) else f"{value:.4f}"


def reported(key: str, value: Optional[float]) -> Optional[float]:
    """A measure's value as shown: a summary count (``num_ret``, ...) as an integer, as it is a sum of counts."""
    return int(value) if key in COUNTS and value is not None else value


def format_interval(interval: Optional[Interval]) -> str:
    """sacrebleu's ``(μ = mean ± half-width)`` and the interval's bounds."""
    if interval is None:
        return "(no interval: undefined in every resample)"
    return (f"(μ = {interval.mean:.4f} ± {interval.half_width:.4f}, "
            f"95% CI [{interval.low:.4f}, {interval.high:.4f}])")
