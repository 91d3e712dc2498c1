"""nbest-eval: evaluate whole MT n-best lists against many weighted valid translations."""

from .data import Gold, GoldPrompt, Hyp, InputError, NBest
from .metrics import KEY_HELP, UnknownMetric
from .prompt import norm
from .scorer import DEFAULT_METRICS, Scored, Scorer, parse_metric_list
from .stats import Stats

__version__ = "0.1.0"

__all__ = ["Gold", "GoldPrompt", "Hyp", "InputError", "NBest", "KEY_HELP", "UnknownMetric", "norm",
           "DEFAULT_METRICS", "Scored", "Scorer", "parse_metric_list", "Stats", "__version__"]
