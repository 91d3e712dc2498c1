"""The ``translation_nbest`` task's options declared elsewhere: ``--nbest-NAME`` for each parameter
the metrics declare (:data:`nbest_eval.metrics.PARAMS`: ``--nbest-wf1-top``, ``--nbest-rbp-p``, ...)
and for each generation setting (:data:`nbest_eval.training.generation.DECLARED`: ``--nbest-beam``,
``--nbest-size``, ...), so that a new parameter or setting is a task option without a change here or
in the task.
"""

# no "from __future__ import annotations": fairseq reads the config dataclass field types at run time

from dataclasses import field, make_dataclass
from enum import Enum
from typing import Any, Dict, Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks.translation import TranslationConfig

from ..metrics import PARAMS, Param
from ..training.generation import DECLARED, Declared

PREFIX = "nbest_"


def _field(param: Param):
    kind = ChoiceEnum(list(param.choices)) if param.choices else param.type
    return (PREFIX + param.name, Optional[kind] if param.default is None else kind,
            field(default=param.default, metadata={"help": param.help}))


def _generation_field(setting: Declared):
    return (setting.fairseq_name, Optional[setting.type] if setting.default is None else setting.type,
            field(default=setting.default, metadata={"help": setting.help}))


#: fairseq's translation config with the scorer's options
ScorerConfig = make_dataclass("ScorerConfig", [_field(param) for param in PARAMS.values()], bases=(TranslationConfig,))
#: ... and the generation settings: the base of the task's config
GenerationConfig = make_dataclass("GenerationConfig", [_generation_field(s) for s in DECLARED.values()],
                                  bases=(ScorerConfig,))


def scorer_options(cfg: Any) -> Dict[str, Any]:
    """The Scorer's options in a task config (fairseq's choices as plain strings)."""
    values = {name: getattr(cfg, PREFIX + name) for name in PARAMS}
    return {name: str(value) if isinstance(value, Enum) else value for name, value in values.items()}
