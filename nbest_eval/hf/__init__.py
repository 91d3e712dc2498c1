"""Hugging Face integration: beam n-best validation inside a ``Trainer`` / ``Seq2SeqTrainer``.

    from nbest_eval.hf import NBestEvalCallback

    nbest = NBestEvalCallback("valid.gold.txt", tokenizer, num_beams=8, max_new_tokens=64)
    args = Seq2SeqTrainingArguments(..., eval_strategy="steps", metric_for_best_model="map",
                                    load_best_model_at_end=True)
    trainer = Seq2SeqTrainer(model, args, ..., callbacks=[nbest])

At every evaluation each process translates its share of the gold prompts with beam search, keeps
``num_return_sequences`` hypotheses per prompt (model score: ``sequences_scores``, the
length-normalized natural-log probability), scores them with :class:`~nbest_eval.scorer.Scorer`,
and all-reduces the additive statistics, so every process sees the same ``eval_map``,
``eval_bleu_100x100``, ``eval_wf1``, ... . One concern a module:

- :mod:`.evaluator`: generation and scoring, no Trainer needed (:class:`NBestEvaluator`);
- :mod:`.callback`: the Trainer callback and how its metrics get into the Trainer's (:class:`NBestEvalCallback`);
- :mod:`.early_stopping`: early stopping on an n-best measure that tells progress from noise
  (:class:`NBestEarlyStoppingCallback`);
- :mod:`.trainer`: trainers that call it without wrapping (:class:`NBestSeq2SeqTrainer`, :class:`NBestTrainer`);
- :mod:`.settings`: the n-best settings the callback records in every checkpoint it saves;
- :mod:`.checks`, :mod:`.positions`: start-up checks (``metric_for_best_model``, generation lengths);
- :mod:`.console`: what the callbacks print at default logging (verdicts, samples);
- :mod:`.checkpoints`: saved checkpoint directories (:func:`score_checkpoint`, :func:`checkpoint_nbest`);
- :mod:`.async_train`, :mod:`.async_eval`: ``mode="async"``, evaluation by a sidecar off the training
  clock (the trainer's hand-off; the sidecar's :class:`~.async_eval.HFSnapshotEvaluator`);
- :mod:`.lists`: each evaluation's n-best lists in a ``save_dir`` (the callback's and the sidecar's);
- :mod:`.averaging`: the average of several checkpoint directories (``select --average``);
- :mod:`.distributed`, :mod:`.result`: all-reduce helpers, the result type.

This package imports torch and transformers; the metric core never does.
"""

from . import _torchaudio  # noqa: F401, I001  (first: lets transformers import beside a broken torchaudio)
from .callback import SAVE_FORMATS, NBestEvalCallback
from .checkpoints import checkpoint_nbest, load_model, score_checkpoint
from .early_stopping import NBestEarlyStoppingCallback
from .evaluator import NBestEvaluator
from .result import NBestResult
from .trainer import NBestEvalMixin, NBestSeq2SeqTrainer, NBestTrainer

__all__ = ["NBestEvaluator", "NBestResult", "NBestEvalCallback", "NBestEarlyStoppingCallback", "NBestEvalMixin",
           "NBestSeq2SeqTrainer", "NBestTrainer", "load_model", "score_checkpoint", "checkpoint_nbest", "SAVE_FORMATS"]
