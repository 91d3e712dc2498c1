"""nbest-eval: evaluate whole MT n-best lists against many weighted valid translations."""

from .api import score
from .data import Gold, GoldPrompt, Hyp, InputError, NBest
from .metrics import Metric, MetricOptions, PromptMean, UnknownMetric, key_help, register
from .prompt import norm
from .scorer import DEFAULT_METRICS, VALIDATION_METRICS, Scored, Scorer, parse_metric_list
from .stats import Stats
from .version import __version__

__all__ = ["score", "Gold", "GoldPrompt", "Hyp", "InputError", "NBest", "Metric", "MetricOptions", "PromptMean",
           "UnknownMetric", "key_help", "register", "norm", "DEFAULT_METRICS", "VALIDATION_METRICS", "Scored",
           "Scorer", "parse_metric_list", "Stats", "__version__"]
