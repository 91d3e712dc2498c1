"""The metric registry: each metric module declares its keys here, and everything that lists or
builds metrics (the scorer, ``--help``, ``nbest-eval metrics``, the README table) reads it.

    @register("p{k}", r"p([1-9][0-9]*)", "precision at rank k (trec_eval P_k)")
    def _precision(match, options):
        return PromptMean(match.group(0), precision_at(int(match.group(1))), N_REL)

A factory gets the key's regular-expression match and the scorer's :class:`MetricOptions`. A metric
whose value depends on a setting declares it as a :class:`Param` when it registers (as ir_measures'
measures declare their parameters), so that everything that passes settings on (the Scorer's
``options``, the command line, the fairseq task's options, the select cache key) reads
:data:`PARAMS` and a new parameter is one declaration:

    RBP_P = Param("rbp_p", float, 0.5, "persistence of RBP'", valid=("in (0, 1)", lambda p: 0 < p < 1))
    register("rbp_t", None, "truncation-aware RBP'", [RBP_P])(lambda match, options: ... options.rbp_p ...)
"""

from __future__ import annotations

import difflib
import numbers
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..data import InputError
from .base import Metric


class UnknownMetric(ValueError):
    pass


@dataclass(frozen=True)
class Param:
    """A setting that metric values depend on, declared once. ``name`` is the Scorer's keyword and
    ``options`` key, ``--name-with-dashes`` on the command line and ``--nbest-name-with-dashes`` in
    the fairseq task. ``type``: bool, int, float or str; a ``default`` of None makes the setting
    optional. ``valid``: what a valid value is and the test of it; parameters of one ``exclusive``
    group exclude each other (at most one is set) and default to None, since a value equal to a
    declared default would pass for one not given (argparse's groups and :func:`settings` alike):
    what none given means is the metric's to say (``--known-top``: the top 3)."""

    name: str
    type: type
    default: Any
    help: str
    choices: Optional[Sequence[str]] = None
    metavar: Optional[str] = None
    valid: Optional[Tuple[str, Callable[[Any], bool]]] = None
    exclusive: Optional[str] = None

    def __post_init__(self) -> None:
        if self.exclusive and self.default is not None:
            raise ValueError(f"parameter {self.name} of the exclusive group {self.exclusive} must default to None, "
                             f"not {self.default!r}: a value equal to it would pass for none given")

    def checked(self, value: Any) -> Any:
        """``value`` as a plain Python value of the parameter's type (an integer is a valid float),
        or InputError saying why it is not one."""
        if value is None and self.default is None:
            return None
        kinds = {bool: bool, int: numbers.Integral, float: numbers.Real, str: str}
        if not isinstance(value, kinds[self.type]) or (self.type is not bool and isinstance(value, bool)):
            raise InputError(f"{self.name} must be a {self.type.__name__}, got {value!r:.60}")
        value = self.type(value)
        if self.choices is not None and value not in self.choices:
            raise InputError(f"{self.name} must be one of {', '.join(self.choices)}; got {value!r:.60}")
        if self.valid is not None and not self.valid[1](value):
            raise InputError(f"{self.name} must be {self.valid[0]}, got {value!r}")
        return value


class MetricOptions(SimpleNamespace):
    """What a factory may need besides its key: every declared parameter's value as an attribute
    (``options.rbp_p``), and ``bleu()``, the scorer's shared BLEU engine (built on the first call)."""


Factory = Callable[["re.Match[str]", MetricOptions], Metric]


@dataclass(frozen=True)
class MetricSpec:
    pattern: str  # as users read it: "p{k}", "bleu_{x}x{y}"
    regex: re.Pattern[str]
    help: str
    factory: Factory
    params: Tuple[Param, ...] = ()  # the settings its values depend on
    higher_is_better: Optional[bool] = True  # None: a count, no quality to select on


REGISTRY: List[MetricSpec] = []
#: every parameter that a registered metric declares, by name, in the order declared
PARAMS: Dict[str, Param] = {}
#: the most digits of a number in a key (p{k}, bleu_{x}x{y}): no list is that long, and int() refuses 4300
MAX_DIGITS = 9


def register(pattern: str, regex: Optional[str], help: str, params: Sequence[Param] = (),
             higher_is_better: Optional[bool] = True) -> Callable[[Factory], Factory]:
    """Declare the keys ``regex`` (default: exactly ``pattern``) built by the decorated factory, whose
    values depend on ``params`` (their values are the factory's ``options.NAME``). Most measures are
    higher-is-better; an error rate (``e{b}``) is not, and a count (``num_ret``) is no quality at all:
    what selects or stops on a key reads :func:`higher_is_better`."""
    for param in params:
        if PARAMS.setdefault(param.name, param) != param:
            raise ValueError(f"parameter {param.name} is declared twice, differently")

    def decorate(factory: Factory) -> Factory:
        REGISTRY.append(MetricSpec(pattern, re.compile(regex if regex is not None else re.escape(pattern)),
                                   help, factory, tuple(params), higher_is_better))
        return factory
    return decorate


def settings(given: Mapping[str, Any]) -> Dict[str, Any]:
    """Every declared parameter's value: ``given``'s, checked (InputError), else its default.
    TypeError for a name that no metric declares, as for an unknown keyword argument."""
    unknown = [name for name in given if name not in PARAMS]
    if unknown:
        raise TypeError(f"unknown scorer option {unknown[0]!r}; the options are {', '.join(PARAMS)}")
    values = {name: param.checked(given[name]) if name in given else param.default for name, param in PARAMS.items()}
    for group in dict.fromkeys(p.exclusive for p in PARAMS.values() if p.exclusive):
        chosen = [name for name, p in PARAMS.items() if p.exclusive == group and values[name] is not None]
        if len(chosen) > 1:
            raise InputError(f"give at most one of {' and '.join(chosen)}")
    return values


def find(key: str):
    """(spec, match) of the registered metric named ``key``, or None."""
    for spec in REGISTRY:
        match = spec.regex.fullmatch(key)
        if match:
            return spec, match
    return None


def key_help() -> str:
    return ", ".join(spec.pattern for spec in REGISTRY)


def suggestion(key: str) -> Optional[str]:
    """What an unknown ``key`` was likely meant as: its number spelled as keys spell it (``f2.0``:
    ``f2``; ``iprec1.00``: ``iprec1.0``), else the pattern of its name and what the number may be
    (``iprec0.25``: ``iprec{r}``, r = 0.0, 0.1, ..., 1.0), else the closest key by spelling."""
    numbered = re.fullmatch(r"(.*?[^0-9.])([0-9]*\.?[0-9]+\.?)", key)
    if numbered and len(key) <= 40:
        name, number = numbered.groups()
        value = float(number)
        for spelled in (f"{value:g}", f"{value:.1f}"):
            if float(spelled) == value and find(name + spelled):
                return name + spelled
        for spec in REGISTRY:
            if re.fullmatch(re.escape(name) + r"\{\w+\}", spec.pattern):
                return f"{spec.pattern}: {re.split(r'[:;]', spec.help)[0]}"
    close = difflib.get_close_matches(key, [spec.pattern for spec in REGISTRY], n=1, cutoff=0.75)
    return close[0] if close else None


def unknown_metric(key: str) -> UnknownMetric:
    """The error of a key that names no metric: a likely meaning, then every valid key."""
    shown = repr(key) if len(key) <= 40 else repr(key[:40]) + "..."
    hint = suggestion(key)
    meant = f" (did you mean {hint}?)" if hint else ""
    return UnknownMetric(f"unknown metric {shown}{meant}; valid keys: {key_help()} (see docs/metrics.md)")


def make_metric(key: str, options: MetricOptions) -> Metric:
    """The metric named ``key``; raises :class:`UnknownMetric` naming the valid keys."""
    if any(len(number) > MAX_DIGITS for number in re.findall(r"[0-9]+", key)):
        shown = repr(key) if len(key) <= 40 else repr(key[:40]) + "..."
        raise UnknownMetric(f"metric {shown}: a number of more than {MAX_DIGITS} digits is out of range")
    found = find(key)
    if found is None:
        raise unknown_metric(key)
    spec, match = found
    return spec.factory(match, options)


def higher_is_better(key: str) -> Optional[bool]:
    """Whether a higher value of the measure ``key`` is better (False: lower is; None: a count, which
    no checkpoint should be selected on); UnknownMetric for a key that names none."""
    found = find(key)
    if found is None:
        raise unknown_metric(key)
    return found[0].higher_is_better


def is_metric_key(key: str) -> bool:
    """Whether ``key`` names a metric, without building it."""
    return find(key) is not None


def markdown_table() -> str:
    """The key table of the README and ``nbest-eval metrics --markdown``."""
    rows = ["| key | what |", "|---|---|"] + [f"| `{s.pattern}` | {s.help} |" for s in REGISTRY]
    return "\n".join(rows) + "\n"
