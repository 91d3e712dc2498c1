"""The metric registry: each metric module declares its keys here, and everything that lists or
builds metrics (the scorer, ``--help``, ``nbest-eval metrics``, the README table) reads it.

    @register("p{k}", r"p([1-9][0-9]*)", "precision at rank k (trec_eval P_k)")
    def _precision(match, options):
        return PromptMean(match.group(0), precision_at(int(match.group(1))), N_REL)

A factory gets the key's regular-expression match and the scorer's :class:`MetricOptions`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Optional

from .base import Metric


class UnknownMetric(ValueError):
    pass


@dataclass(frozen=True)
class MetricOptions:
    """What a factory may need besides its key; ``bleu`` returns the scorer's shared BLEU engine
    (building it on the first call)."""

    bleu: Callable[[], object]
    wf1_top: Optional[int] = None
    wf1_threshold: Optional[float] = None
    rbp_p: float = 0.5


Factory = Callable[["re.Match[str]", MetricOptions], Metric]


@dataclass(frozen=True)
class MetricSpec:
    pattern: str  # as users read it: "p{k}", "bleu_{x}x{y}"
    regex: re.Pattern[str]
    help: str
    factory: Factory


REGISTRY: List[MetricSpec] = []
#: the most digits of a number in a key (p{k}, bleu_{x}x{y}): no list is that long, and int() refuses 4300
MAX_DIGITS = 9


def register(pattern: str, regex: Optional[str], help: str) -> Callable[[Factory], Factory]:
    """Declare the keys ``regex`` (default: exactly ``pattern``) built by the decorated factory."""
    def decorate(factory: Factory) -> Factory:
        REGISTRY.append(MetricSpec(pattern, re.compile(regex if regex is not None else re.escape(pattern)),
                                   help, factory))
        return factory
    return decorate


def find(key: str):
    """(spec, match) of the registered metric named ``key``, or None."""
    for spec in REGISTRY:
        match = spec.regex.fullmatch(key)
        if match:
            return spec, match
    return None


def key_help() -> str:
    return ", ".join(spec.pattern for spec in REGISTRY)


def make_metric(key: str, options: MetricOptions) -> Metric:
    """The metric named ``key``; raises :class:`UnknownMetric` naming the valid keys."""
    shown = repr(key) if len(key) <= 40 else repr(key[:40]) + "..."
    if any(len(number) > MAX_DIGITS for number in re.findall(r"[0-9]+", key)):
        raise UnknownMetric(f"metric {shown}: a number of more than {MAX_DIGITS} digits is out of range")
    found = find(key)
    if found is None:
        raise UnknownMetric(f"unknown metric {shown}; valid keys: {key_help()} (see docs/metrics.md)")
    spec, match = found
    return spec.factory(match, options)


def is_metric_key(key: str) -> bool:
    """Whether ``key`` names a metric, without building it."""
    return find(key) is not None


def markdown_table() -> str:
    """The key table of the README and ``nbest-eval metrics --markdown``."""
    rows = ["| key | what |", "|---|---|"] + [f"| `{s.pattern}` | {s.help} |" for s in REGISTRY]
    return "\n".join(rows) + "\n"
