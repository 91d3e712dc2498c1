"""How many positions a model can embed. Generating past them fails deep in torch ("IndexError:
index out of range in self"), after training has run until the first evaluation, so the evaluator
checks its lengths against them before it generates (:meth:`NBestEvaluator.check_lengths`).

Only a model whose absolute position embeddings are a fixed table has such a limit: BART, mBART,
Marian, Pegasus (``embed_positions``), GPT-2 (``wpe``), BERT-style encoders (``position_embeddings``).
Relative (T5), rotary (Llama) and growing (M2M100) positions have none.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Tuple

import torch

#: the config attributes that give the table's size, per side, most specific first
SOURCE_ATTRIBUTES = ("max_source_positions", "n_positions", "max_position_embeddings")
TARGET_ATTRIBUTES = ("max_target_positions", "n_positions", "max_position_embeddings")
#: transformers' names for a table of absolute position embeddings
_TABLES = ("embed_positions", "wpe", "position_embeddings")


class Limit(NamedTuple):
    """``positions`` tokens at most, as ``config.{attribute}`` says."""

    attribute: str
    positions: int


def position_limits(model: Any) -> Tuple[Optional[Limit], Optional[Limit]]:
    """(source, target) limits of ``model``; None where it has no table of positions (see above).
    A decoder-only model's sequence is its prompt and what it generates: both are its target."""
    modules = model.named_modules() if isinstance(model, torch.nn.Module) else ()
    tables = any(isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _TABLES
                 for name, module in modules)
    config = getattr(model, "config", None)
    if not tables or config is None:
        return None, None
    return _limit(config, SOURCE_ATTRIBUTES), _limit(config, TARGET_ATTRIBUTES)


def _limit(config: Any, attributes: Sequence[str]) -> Optional[Limit]:
    for attribute in attributes:
        value = getattr(config, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return Limit(attribute, value)
    return None
