"""nbest-eval: evaluate whole MT n-best lists against many weighted valid translations."""

# The core (data, prompt, stats, scorer, api, signature) lives here; each layer above it has a folder:
# docs/architecture.md lists them and says what may import what.

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

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

#: modules that 0.6.0 moved into the layer folders; their old paths import, with a DeprecationWarning, for
#: one release (CHANGELOG.md), as the very module they became (so a monkeypatch through either works)
MOVED = {"averaging": "selection.averaging", "cache_entry": "selection.cache_entry",
         "checkpoint_files": "selection.checkpoint_files", "run_settings": "selection.run_settings",
         "early_stopping": "training.early_stopping", "stopping_state": "training.stopping_state",
         "matching": "training.matching", "samples": "training.samples", "resampling": "significance.resampling",
         "writable": "files.writable", "output": "files.output", "sigterm": "files.sigterm",
         "workers": "processes.workers", "pipeline": "processes.pipeline",
         "scoring_helper": "processes.scoring_helper", "synth": "analysis.synth"}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``nbest_eval.<old name>`` as the module of its new path."""

    def find_spec(self, name, path=None, target=None):
        package, _, old = name.partition(".")
        if package == __name__ and old in MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        new = f"{__name__}.{MOVED[spec.name.partition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):
        """The module ran when its new path was imported."""


sys.meta_path.append(_OldPaths())
