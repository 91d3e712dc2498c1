"""Hugging Face's half of validation off the training clock (issue 33), sidecar side:
:class:`HFSnapshotEvaluator`, which ``nbest-eval watch`` runs on the snapshots that
``NBestEvalCallback(mode="async")`` hands off (:mod:`.async_train`).

A snapshot is a ``save_pretrained`` folder; the tokenizer is saved once, in the queue's
``tokenizer/``; the evaluator's settings are the manifest's (:func:`.settings.settings_of`, the record
every checkpoint gets). The evaluator is rebuilt from them (:func:`.settings.evaluator_from_settings`)
and runs the loop's own :meth:`NBestEvaluator.evaluate`: the same prompts in the same order, hence
the same batches and the same tally order. So for the same weights, on the same device kind, dtype
and thread count, the values, per-prompt rows and lists are the loop's, bit for bit.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Mapping, Optional

import torch

from ..data import InputError
from ..formats import read_gold
from ..training.handoff import Queue
from ..training.handoff_files import Tags
from ..training.sidecar import Evaluation
from .checkpoints import load_model
from .lists import ListSaver
from .settings import evaluator_from_settings

#: the hand-off record in each snapshot folder (epoch, hand-off time, validation number)
SNAPSHOT_FILE = "snapshot.json"
TOKENIZER = "tokenizer"
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


class HFSnapshotEvaluator:
    """Evaluates HF snapshots as :class:`~nbest_eval.hf.callback.NBestEvalCallback` evaluates in the loop.

    ``manifest``: the run's (``settings``: the evaluator record; ``gold``: path and digest;
    ``dtype``: the training's mixed precision, run under autocast as the loop's generation is);
    ``queue``: the run's queue (its ``tokenizer/``); ``gold`` replaces a moved gold file (its digest
    must match); ``save_dir``: where to save each evaluation's lists (None: the manifest's
    ``save_lists``, the callback's ``save_dir``), as the callback saves them (:class:`.lists.ListSaver`)."""

    def __init__(self, manifest: Mapping[str, Any], queue: Queue, *, gold: Optional[str] = None,
                 device: str = "cpu", save_dir: Optional[str] = None):
        record, recorded_gold = manifest.get("settings"), manifest.get("gold") or {}
        if not isinstance(record, dict) or not isinstance(record.get("evaluator"), dict):
            raise InputError("the manifest records no Hugging Face evaluator settings", queue.root)
        path = gold or recorded_gold.get("path")
        if not path:
            raise InputError("the manifest names no gold file: give --gold", queue.root)
        full = read_gold(path)
        if recorded_gold.get("digest") not in (None, full.digest()):
            raise InputError("this gold is not the one the run was trained with (its digest differs)", path)
        self.tokenizer_dir = queue.path(TOKENIZER)
        tokenizer = _tokenizer(self.tokenizer_dir)
        self.evaluator = evaluator_from_settings(record, full, tokenizer, source=queue.path("manifest.json"))
        self.scorer, self.gold = self.evaluator.scorer, self.evaluator.gold
        self.device = torch.device(device)
        self.autocast = DTYPES.get(manifest.get("dtype"))
        lists = manifest.get("save_lists") if save_dir is None else {"dir": save_dir}
        lists = lists if isinstance(lists, dict) and lists.get("dir") else None
        self.lists = None if lists is None else \
            ListSaver(lists["dir"], lists.get("format") or "jsonl", lists.get("name"), self.gold, full)

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], queue: Queue, **options: Any) -> HFSnapshotEvaluator:
        return cls(manifest, queue, **options)

    def evaluate(self, path: str, tags: Tags) -> Evaluation:
        started = time.perf_counter()
        model, _ = load_model(path, self.device, tokenizer=self.tokenizer_dir)
        load_s = time.perf_counter() - started
        with self._precision():
            result = self.evaluator.evaluate(model, gather_nbest=self.lists is not None)
        # under torchrun only rank 0 holds the gathered lists (result.nbest), and saves them
        saved = None if self.lists is None or result.nbest is None else self.lists.save(result.nbest, tags.step)
        timings = {"load_s": load_s, "nbest_gen_s": result.gen_s, "nbest_score_s": result.score_s,
                   "nbest_overhead_s": result.overhead_s}
        handed_off_at = _snapshot_record(path).get("handed_off_at")
        if isinstance(handed_off_at, (int, float)):
            timings.update(handed_off_at=handed_off_at, lag_s=time.time() - handed_off_at)
        return Evaluation(result.values, result.stats, result.per_prompt, timings,
                          None if saved is None else os.fspath(saved))

    def _precision(self):
        """The training's autocast (mixed precision), where it had one: the loop generates under it."""
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def close(self) -> None:
        self.evaluator.close()


def _tokenizer(tokenizer_dir: str) -> Any:
    """The queue's tokenizer, which the trainer saved once at the start."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load the run's tokenizer ({str(err).splitlines()[0]})", tokenizer_dir) from None


def _snapshot_record(path: str) -> dict:
    try:
        with open(os.path.join(path, SNAPSHOT_FILE), encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
