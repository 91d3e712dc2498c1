"""The ``translation_nbest`` task's scorer options: ``--nbest-NAME`` for each parameter the metrics
declare (:data:`nbest_eval.metrics.PARAMS`: ``--nbest-wf1-top``, ``--nbest-rbp-p``, ...), so that a new
parameter is a task option without a change here or in the task.
"""

# no "from __future__ import annotations": fairseq reads the config dataclass field types at run time

from dataclasses import field, make_dataclass
from enum import Enum
from typing import Any, Dict, Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks.translation import TranslationConfig

from ..metrics import PARAMS, Param

PREFIX = "nbest_"


def _field(param: Param):
    kind = ChoiceEnum(list(param.choices)) if param.choices else param.type
    return (PREFIX + param.name, Optional[kind] if param.default is None else kind,
            field(default=param.default, metadata={"help": param.help}))


#: fairseq's translation config with the scorer's options: the base of the task's config
ScorerConfig = make_dataclass("ScorerConfig", [_field(param) for param in PARAMS.values()], bases=(TranslationConfig,))


def scorer_options(cfg: Any) -> Dict[str, Any]:
    """The Scorer's options in a task config (fairseq's choices as plain strings)."""
    values = {name: getattr(cfg, PREFIX + name) for name in PARAMS}
    return {name: str(value) if isinstance(value, Enum) else value for name, value in values.items()}
