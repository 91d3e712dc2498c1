"""How many positions a model can embed. Generating past them fails deep in torch ("IndexError:
index out of range in self"), after training has run until the first evaluation, so the evaluator
checks its lengths against them before it generates (:func:`check_lengths`, one rule for the callback
and ``nbest-eval select --hf``, each naming its own options: :class:`LengthNames`).

Only a model whose absolute position embeddings are a fixed table has such a limit: BART, mBART,
Marian, Pegasus (``embed_positions``), GPT-2 (``wpe``), BERT-style encoders (``position_embeddings``).
Relative (T5), rotary (Llama) and growing (M2M100) positions have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import torch

from ..data import InputError

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


@dataclass(frozen=True)
class LengthNames:
    """How a caller spells the length settings that a refusal advises: NBestEvaluator's arguments by
    default; ``nbest-eval select`` passes its options."""

    max_len_a: str = "max_len_a"
    max_len_b: str = "max_len_b"
    max_new_tokens: str = "max_new_tokens"
    max_source_length: str = "max_source_length"


#: NBestEvaluator's (and the callback's) spelling
ARGUMENT_NAMES = LengthNames()


def check_lengths(model: Any, width: int, new: Optional[int], max_len: Optional[Tuple[float, int]],
                  names: LengthNames = ARGUMENT_NAMES) -> None:
    """Refuse (InputError with the bound that fits) a longest source of ``width`` tokens, or ``new``
    new tokens (None: no bound; ``max_len``: the (a, b) that set it, else ``max_new_tokens`` did),
    beyond ``model``'s positions. An encoder-decoder feeds its decoder the start token and all but
    the last new token, so ``new`` may equal the positions; a decoder-only model also feeds its prompt."""
    source, target = position_limits(model)
    decoder_only = not bool(getattr(getattr(model, "config", None), "is_encoder_decoder", True))
    if not decoder_only and source is not None and width > source.positions:
        raise InputError(f"the longest prompt has {width} tokens, more than the model's {source.positions} "
                         f"positions (config.{source.attribute}): set {names.max_source_length} <= {source.positions}")
    room = None if target is None else target.positions - (width - 1 if decoder_only else 0)
    if room is None or new is None or new <= room:
        return
    if max_len is None:
        asked, fix = f"{names.max_new_tokens} {new}", f"lower {names.max_new_tokens} to at most {room}"
    else:
        formula = f"{names.max_len_a} * {width} + {names.max_len_b}"
        asked = f"{formula} = {max_len[0]:g} * {width} + {max_len[1]} = {new} new tokens"
        fix = f"lower {names.max_len_b} (or {names.max_len_a}) so that {formula} <= {room}"
    where = f"config.{target.attribute}"
    if decoder_only:
        raise InputError(f"the longest prompt ({width} tokens) and {asked} need {width + new - 1} positions, more than "
                         f"the model's {target.positions} ({where}): {fix}, or set {names.max_source_length}")
    raise InputError(f"{asked}: more than the model's {target.positions} positions ({where}); {fix}")
