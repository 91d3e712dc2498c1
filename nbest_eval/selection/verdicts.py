"""What choosing a checkpoint found (:func:`~nbest_eval.selection.choosing.select`'s result): each
checkpoint's :class:`Verdict` against the best, what a measure picks (:class:`Choice`), an
early-stopping rule replayed (:class:`StoppingReplay`), an average judged like a checkpoint
(:class:`Average`), and the whole :class:`Selection`. Plain data over checkpoint indices; naming
and rendering them is :mod:`nbest_eval.selection.report`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..significance import Interval
from ..training.early_stopping import EarlyStopping


@dataclass
class Verdict:
    """A checkpoint's bootstrap interval on the selection measure, its p-value against the best (and
    Holm's across the checkpoints), and whether it is statistically tied with the best."""

    interval: Optional[Interval]
    p_value: Optional[float]
    p_holm: Optional[float]
    tied: bool

    def notes(self) -> Dict[str, Any]:
        """Flat, for the table's JSON and CSV."""
        ci = self.interval
        return {"ci_mean": ci and ci.mean, "ci_low": ci and ci.low, "ci_high": ci and ci.high,
                "p_value": self.p_value, "p_holm": self.p_holm, "tied": self.tied}


@dataclass
class Choice:
    """What one measure would pick among checkpoints, and how sure: each checkpoint's value and
    :class:`Verdict`, the best (None if no value) and the checkpoints tied with it."""

    values: List[Optional[float]]
    best: Optional[int]
    verdicts: List[Verdict]

    @property
    def tied(self) -> List[int]:
        return [i for i, verdict in enumerate(self.verdicts) if verdict.tied]


@dataclass
class StoppingReplay:
    """What an early-stopping rule would have done, validating once per checkpoint in order: the
    checkpoint after which it stops (None: it never stops), the one it keeps then, and that one's
    p-value against the best of all checkpoints (1 when it is the best)."""

    rule: EarlyStopping
    stopped_after: Optional[int]
    kept: Optional[int]
    p_value: Optional[float]

    @property
    def trained(self) -> Optional[int]:
        """Checkpoints trained until the stop (None: all)."""
        return None if self.stopped_after is None else self.stopped_after + 1


@dataclass
class Average:
    """An average of checkpoints' parameters, judged like a checkpoint: the checkpoints averaged
    (indices, best first) and its :class:`Verdict` against the best single checkpoint."""

    averaged: List[int]
    verdict: Verdict


@dataclass
class Selection:
    """:func:`select`'s result. ``pick``: what ``prefer`` picks (the best, or the earliest tied
    checkpoint); ``n_samples``: the resamples the test used (0 for the t-test); ``average``: set by
    :func:`judge_average`."""

    key: str
    maximize: bool
    choice: Choice
    test: str
    n_samples: int
    seed: Optional[int]
    alpha: float
    prefer: str
    pick: Optional[int]
    stopping: Optional[StoppingReplay] = None
    average: Optional[Average] = None

    @property
    def best(self) -> Optional[int]:
        return self.choice.best

    @property
    def tied(self) -> List[int]:
        return self.choice.tied


