"""Trainers with n-best validation built in: ``evaluation_loop`` is overridden, not wrapped, and
the callbacks are given, not looked up on the call stack.

    trainer = NBestSeq2SeqTrainer(model, args, ..., nbest_eval=NBestEvalCallback(gold, tokenizer))
"""

from __future__ import annotations

from typing import Any, List

from transformers import Seq2SeqTrainer, Trainer


class NBestEvalMixin:
    """Trainer mixin: n-best metrics computed in ``evaluation_loop``, no wrapping, no stack lookup.

        trainer = NBestSeq2SeqTrainer(model, args, ..., nbest_eval=NBestEvalCallback(gold, tokenizer))

    ``nbest_eval`` is one callback or a list of them (give each a distinct ``name``).
    """

    def __init__(self, *args: Any, nbest_eval: Any = None, **kwargs: Any):
        self.nbest_callbacks: List[Any] = []  # NBestEvalCallback objects, which attach() adds here
        super().__init__(*args, **kwargs)
        callbacks = [] if nbest_eval is None else list(nbest_eval) if isinstance(nbest_eval, (list, tuple)) \
            else [nbest_eval]
        for callback in callbacks:
            callback.attach(self)

    def evaluation_loop(self, dataloader, description, *args, **kwargs):
        output = super().evaluation_loop(dataloader, description, *args, **kwargs)
        prefix = kwargs.get("metric_key_prefix", args[2] if len(args) > 2 else "eval")
        for callback in self.nbest_callbacks:
            output = callback._in_loop(self, output, description, prefix)
        return output


class NBestSeq2SeqTrainer(NBestEvalMixin, Seq2SeqTrainer):
    """``Seq2SeqTrainer`` with n-best validation: ``NBestSeq2SeqTrainer(..., nbest_eval=callback)``."""


class NBestTrainer(NBestEvalMixin, Trainer):
    """``Trainer`` with n-best validation: ``NBestTrainer(..., nbest_eval=callback)``."""

