"""fairseq's half of validation off the training clock (issue 33): the snapshot a ``translation_nbest``
run hands off, and :class:`FairseqSnapshotEvaluator`, which a sidecar
(:func:`nbest_eval.training.sidecar.watch`) runs on it.

A snapshot is an ordinary fairseq checkpoint without optimizer state (:func:`.snapshot.snapshot_state`), so
``nbest-eval select`` and ``fairseq-generate`` read it too. The evaluator loads its weights into a
model built once, in the run's dtype, and goes over the valid split in the loop's exact batches
(:func:`~nbest_eval.fairseq.generation.valid_batches`), each generated and scored by the function the
task's ``valid_step`` calls (:func:`~nbest_eval.fairseq.generation.score_batch`); the batch totals
are added in the order fairseq's meters add them, and the per-prompt rows as the task adds them. So
for the same weights it gives the loop's values, bit for bit, and the rule decides on the same rows.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Mapping, Optional, Tuple

import torch
from fairseq import tasks, utils
from omegaconf import OmegaConf, open_dict

from ..data import InputError
from ..processes.pipeline import InlineScoring, start_scoring
from ..significance import PerPrompt
from ..stats import Stats
from ..training.distributed import all_reduce, gather_to_rank0, world
from ..training.handoff_files import Tags
from ..training.sidecar import Evaluation
from . import early_stopping
from .checkpoints import in_run_dtype, read_checkpoint
from .generation import TIMINGS, BatchScore, NBestGenerator, score_batch, valid_batches
from .save_dir import save_validation
from .snapshot import SNAPSHOT_KEY

SCORING = ("inline", "helper")



class FairseqSnapshotEvaluator:
    """Evaluates fairseq snapshots as the ``translation_nbest`` task validates (see the module docstring).

    ``task_cfg``: the run's task config (the manifest's ``settings.task``); ``data``/``gold`` replace
    moved paths; ``device`` "cpu" or "cuda[:N]"; ``scoring`` "inline" (on this thread: on a small
    machine the training process has the other core) or "helper" (a scoring process, as the loop).
    The lists are saved as the loop saves them (:func:`.save_dir.save_validation`) to the run's
    ``--nbest-save-dir``, or ``save_dir`` ("": none)."""

    def __init__(self, task_cfg: Mapping[str, Any], *, data: Optional[str] = None, gold: Optional[str] = None,
                 device: str = "cpu", scoring: str = "inline", trust: bool = False, save_dir: Optional[str] = None):
        if scoring not in SCORING:
            raise InputError(f"unknown scoring {scoring!r}; use one of: {', '.join(SCORING)}")
        cfg = OmegaConf.create(dict(task_cfg))
        self.save_dir = cfg.get("nbest_save_dir") if save_dir is None else save_dir or None
        with open_dict(cfg):
            cfg.nbest_save_dir = None  # the loop's --nbest-save-dir is the trainer's
            if data:
                cfg.data = data
            if gold:
                cfg.nbest_gold = gold
        if cfg.get("_name") != "translation_nbest" or not cfg.get("nbest_gold"):
            raise InputError("the run's task is not translation_nbest with an --nbest-gold")
        self.task = tasks.setup_task(cfg, from_checkpoint=True)
        self.subset = self.task.nbest_subset
        self.task.load_dataset(self.subset, combine=False, epoch=1)
        self.plan, self.scorer, self.gold = self.task.plan, self.task.scorer, self.task.plan.gold
        self.device, self.trust = torch.device(device), trust
        self.scoring = InlineScoring(self.scorer) if scoring == "inline" else start_scoring(self.scorer,
                                                                                              self.gold.prompts)
        self.model = self.generator = None

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], **options: Any) -> FairseqSnapshotEvaluator:
        settings = manifest.get("settings")
        if not isinstance(settings, dict) or not isinstance(settings.get("task"), dict):
            raise InputError("the manifest records no fairseq task settings")
        return cls(settings["task"], **options)

    def _load(self, path: str) -> Tuple[Any, Dict[str, Any]]:
        """The run's config and the snapshot's hand-off record, with the snapshot's weights in the model
        (built at the first snapshot, in the run's dtype: loading half weights into a float model would
        widen them)."""
        state = read_checkpoint(path, self.trust)
        cfg = state["cfg"]
        if self.model is None:
            self.model = in_run_dtype(self.task.build_model(cfg.model, from_checkpoint=True), cfg).to(self.device)
            self.generator = NBestGenerator(self.task, [self.model], self.task.nbest_options)
        self.model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
        self.model.eval()
        return cfg, (state.get("extra_state") or {}).get(SNAPSHOT_KEY) or {}

    def evaluate(self, path: str, tags: Tags) -> Evaluation:
        """Under ``torch.distributed`` (``nbest-eval watch`` under torchrun) every rank calls this on the
        same snapshot and validates its shard, as a trainer of that many workers does: each batch's
        totals summed over the ranks in float64 (fairseq's trainer all-reduces each valid step), the
        disjoint per-prompt rows summed once, the lists gathered and saved on rank 0."""
        started = time.perf_counter()
        cfg, snapshot = self._load(path)
        load_s = time.perf_counter() - started
        rank, size = world()
        totals: Dict[str, Any] = {}
        seconds = dict.fromkeys(TIMINGS, 0.0)
        rows, nbest = None, {}
        for sample in valid_batches(self.task, [self.model], cfg, self.subset, num_shards=size, shard_id=rank):
            batch = self._score(sample)
            stats = _summed(self.scorer.stat_names, batch.stats, self.device) if size > 1 else batch.stats
            for prompt, hyps in batch.nbest.items():
                nbest.setdefault(prompt, hyps)
            for name in self.scorer.stat_names:  # as fairseq's SumMeter: ((0 + b1) + b2) + ...
                totals[name] = totals.get(name, 0) + float(stats[name])
            for key in TIMINGS:
                seconds[key] += batch.seconds[key]
            step = {early_stopping.ROWS: early_stopping.rows_tensor(self.plan, self.scorer, batch.per_prompt)}
            rows = early_stopping.add_rows(rows, [step])
        if rows is None:
            raise InputError(f"the '{self.subset}' split has no batches to validate", path)
        if size > 1:
            rows, seconds, nbest = _gathered(rows, seconds, nbest, self.device)
        stats = Stats(totals)
        per_prompt = PerPrompt.from_matrix(self.scorer, self.gold.ids(), rows.numpy(), tags.name)
        values = self.scorer.values(stats)
        saved = None
        if self.save_dir and rank == 0:
            logged = {key: 0.0 if value is None else float(value) for key, value in values.items()}  # as the task logs
            saved = save_validation(self.save_dir, self.subset, self.gold, nbest, tags.epoch, tags.step, logged)
        timings = {"load_s": load_s, **seconds}
        if isinstance(snapshot.get("handed_off_at"), (int, float)):  # a snapshot a trainer handed off
            timings.update(handed_off_at=snapshot["handed_off_at"], lag_s=time.time() - snapshot["handed_off_at"])
        return Evaluation(values, stats, per_prompt, timings, saved)

    def _score(self, sample: Mapping[str, Any]) -> BatchScore:
        """One batch generated and scored; a shard's padding batch (``{}``) scores nothing, as the
        trainer zeroes its dummy batch's statistics."""
        if not sample:
            return BatchScore(self.scorer.zero(), dict.fromkeys(TIMINGS, 0.0), [], {})
        if self.device.type == "cuda":
            sample = utils.move_to_cuda(sample, device=self.device)
        return score_batch(self.generator, self.plan, self.scoring.tally(), sample)

    def close(self) -> None:
        self.scoring.close()


def _summed(names: Tuple[str, ...], stats: Stats, device: torch.device) -> Dict[str, float]:
    """A valid step's totals summed over the ranks in float64, as fairseq's trainer sums them."""
    return dict(zip(names, all_reduce([float(stats[name]) for name in names], "sum", device)))


def _gathered(rows: torch.Tensor, seconds: Dict[str, float], nbest: Dict[str, Any], device: torch.device):
    """Every rank's rows (each prompt is one rank's: the sum is exact), the slowest rank's seconds,
    and on rank 0 every rank's lists (elsewhere: this rank's)."""
    summed = all_reduce(rows.to(torch.float64).flatten().tolist(), "sum", device)
    rows = torch.tensor(summed, dtype=torch.float64).view(rows.shape)
    slowest = all_reduce([seconds[key] for key in TIMINGS], "max", device)
    parts = gather_to_rank0(nbest)
    if parts is not None:  # in rank order, the first list of a prompt kept, as the loop's save keeps it
        nbest = {}
        for part in parts:
            for prompt, hyps in part.items():
                nbest.setdefault(prompt, hyps)
    return rows, dict(zip(TIMINGS, slowest)), nbest
