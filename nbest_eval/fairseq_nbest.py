"""n-best lists from fairseq models: batched beam search over a dataset -> ``{prompt_id: [Hyp]}``.

Shared by the ``translation_nbest`` training task (:mod:`nbest_eval.fairseq_task`), which scores
the model being trained at every validation, and by anything that scores saved checkpoints
afterwards: both go through :class:`NBestGenerator` with the same :class:`NBestOptions`, so a
checkpoint re-scored later gives the values logged when it was saved::

    models, cfg, task = load_checkpoint("checkpoints/checkpoint_best.pt")   # task: translation_nbest
    nbest = generate_nbest(task, models, cfg)                                # the valid split
    values = task.scorer.score(task.plan.gold, nbest).values

Generation is fairseq's own :class:`~fairseq.sequence_generator.SequenceGenerator`, one call per
batch; only the text post-processing (``--nbest-remove-bpe``, ``--nbest-detok``) runs per hypothesis.
Valid sentences are matched to gold prompts by :func:`plan_prompts`. Hypothesis scores are
fairseq's natural-log scores, length-normalized with ``lenpen`` as ``fairseq-generate`` prints them
(before its division by ln 2).

This module imports torch and fairseq; the metric core (``nbest_eval`` itself, the scorer, metrics
and formats) never does.
"""

from __future__ import annotations

import logging
import os
import warnings
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .data import Gold, Hyp, InputError, NBest, prompt_id


def allow_full_checkpoint_load() -> None:
    """fairseq checkpoints pickle their configs; torch >= 2.6 refuses them unless told otherwise.

    Sets ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` unless the user set it (or its opposite) already.
    torch reads it at every ``torch.load`` that does not pass ``weights_only``, as fairseq's do.
    """
    if not os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD"):
        os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")


allow_full_checkpoint_load()

import torch  # noqa: E402  (after the environment is set)
from fairseq import checkpoint_utils, utils  # noqa: E402
from fairseq.data import encoders  # noqa: E402


logger = logging.getLogger(__name__)

MAP_MODES = ("id", "order")


@dataclass
class NBestOptions:
    """How n-best lists are generated and post-processed (the task's ``--nbest-*`` options)."""

    beam: int = 10
    size: Optional[int] = None  # hypotheses kept per prompt; None: the beam size
    max_len_a: float = 0.0
    max_len_b: int = 200
    lenpen: float = 1.0
    remove_bpe: Optional[str] = None
    detok: str = "space"

    def __post_init__(self):
        if self.beam < 1:
            raise InputError(f"--nbest-beam must be >= 1, got {self.beam}")
        if self.size is None:
            self.size = self.beam
        if not 1 <= self.size <= self.beam:
            raise InputError(f"--nbest-size must be between 1 and --nbest-beam ({self.beam}), got {self.size}: "
                             f"beam search returns at most beam-size hypotheses")

    @classmethod
    def from_cfg(cls, cfg: Any) -> "NBestOptions":
        """From a ``translation_nbest`` task config (or any object with the ``nbest_*`` attributes)."""
        return cls(beam=cfg.nbest_beam, size=cfg.nbest_size, max_len_a=cfg.nbest_max_len_a,
                   max_len_b=cfg.nbest_max_len_b, lenpen=cfg.nbest_lenpen,
                   remove_bpe=cfg.nbest_remove_bpe, detok=cfg.nbest_detok)

    def generator_args(self) -> Namespace:
        """Arguments for :meth:`fairseq.tasks.FairseqTask.build_generator` (a plain beam search)."""
        return Namespace(beam=self.beam, max_len_a=self.max_len_a, max_len_b=self.max_len_b,
                         lenpen=self.lenpen)


class TextDecoder:
    """Token ids -> text: the dictionary's symbols, BPE removed (fairseq ``post_process`` names:
    ``sentencepiece``, ``subword_nmt``, ``@@ `` ...), then a fairseq tokenizer's ``decode``
    (``space`` and ``none`` leave the text alone; ``moses`` needs ``sacremoses``)."""

    def __init__(self, dictionary, remove_bpe: Optional[str] = None, detok: Optional[str] = "space",
                 lang: Optional[str] = None):
        self.dictionary = dictionary
        self.remove_bpe = remove_bpe or None
        self.tokenizer = None
        if detok and detok not in ("space", "none"):
            self.tokenizer = encoders.build_tokenizer(
                Namespace(tokenizer=detok, source_lang=lang or "en", target_lang=lang or "en"))

    def __call__(self, tokens) -> str:
        text = self.dictionary.string(tokens.int().cpu(), self.remove_bpe)
        return self.tokenizer.decode(text) if self.tokenizer is not None else text


@dataclass
class PromptPlan:
    """Which dataset rows are generated and scored, and as which gold prompt.

    ``gold`` holds the scored prompts in dataset order; ``rows`` maps the dataset index of each
    prompt's first occurrence to its prompt id (later repetitions are neither generated nor
    scored); ``sources`` keeps those rows' source token ids, so that a batch row whose id is
    canonical but whose tokens differ (a padding batch from another split) is not mistaken for it.
    """

    gold: Gold
    rows: Dict[int, str]
    sources: Dict[int, Tuple[int, ...]] = field(default_factory=dict, repr=False)
    mode: str = "id"
    repeats: int = 0  # dataset rows that repeat an earlier prompt

    def __len__(self) -> int:
        return len(self.rows)

    def batch_rows(self, sample: Mapping[str, Any], pad: int) -> Tuple[List[int], List[str]]:
        """Positions in ``sample`` to generate for, and their prompt ids."""
        positions, prompts = [], []
        src_tokens = sample["net_input"]["src_tokens"]
        for position, index in enumerate(sample["id"].tolist()):
            prompt = self.rows.get(index)
            if prompt is None:
                continue
            if self.sources:
                row = src_tokens[position]
                if tuple(row[row.ne(pad)].tolist()) != self.sources[index]:
                    continue
            positions.append(position)
            prompts.append(prompt)
        return positions, prompts


def plan_prompts(sources: Sequence[str], gold: Gold, mode: str = "id", max_prompts: Optional[int] = None,
                 split: str = "valid", tokens: Optional[Sequence[Tuple[int, ...]]] = None,
                 unk: Optional[str] = "<unk>") -> PromptPlan:
    """Match the split's (decoded, detokenized) source lines to the gold's prompts.

    ``id``: a line's prompt is ``prompt_`` + md5 of the lowercased line, as STAPLE computes ids;
    every line must be a gold prompt and every gold prompt must be a line. ``order``: line i is the
    gold's prompt i; the counts must match and no line may be a *different* gold prompt's text.
    Repeated prompts are generated and scored once. ``max_prompts`` keeps the first N distinct
    prompts (in split order). Any mismatch raises :class:`InputError` naming the line and why.
    """
    if mode not in MAP_MODES:
        raise InputError(f"--nbest-map must be one of {', '.join(MAP_MODES)}, got {mode!r}")
    if max_prompts is not None and max_prompts < 1:
        raise InputError(f"--nbest-max-prompts must be >= 1, got {max_prompts}")
    where = f"the gold {gold.path}" if gold.path else "the gold"
    if not sources:
        raise InputError(f"the '{split}' split is empty: nothing to score against {where}")
    position = {p.id: i for i, p in enumerate(gold)}
    if mode == "id":
        ids = [prompt_id(text) for text in sources]
        for line, (text, pid) in enumerate(zip(sources, ids), 1):
            if pid not in position:
                hint = ("; the source holds <unk> (words missing from the dictionary), so its text cannot be "
                        "recovered: match by position with --nbest-map order"
                        if unk and unk in text.split() else
                        "; check that the gold belongs to this split and that --nbest-remove-bpe/--nbest-detok "
                        "undo the source preprocessing, or match by position with --nbest-map order")
                raise InputError(f"line {line} of the '{split}' split, {text!r}, is not a prompt of {where} "
                                 f"(its id would be {pid}){hint}")
        seen = set(ids)
        for number, prompt in enumerate(gold, 1):
            if prompt.id not in seen:
                raise InputError(f"prompt {number} of {where}, {prompt.text!r} ({prompt.id}), matches no line of "
                                 f"the '{split}' split ({len(sources)} lines): the gold must be this split's gold")
    else:
        if len(sources) != len(gold):
            raise InputError(f"the '{split}' split has {len(sources)} lines but {where} has {len(gold)} prompts: "
                             f"--nbest-map order needs exactly one gold prompt per line, in the same order")
        ids = gold.ids()
        for line, text in enumerate(sources, 1):
            other = position.get(prompt_id(text))
            if other is not None and other != line - 1:
                raise InputError(f"line {line} of the '{split}' split, {text!r}, is prompt {other + 1} of {where}, "
                                 f"but --nbest-map order pairs it with prompt {line} "
                                 f"({gold.prompts[line - 1].text!r}): the two files are not in the same order")
    rows: Dict[int, str] = {}
    first: Dict[str, int] = {}
    for index, pid in enumerate(ids):
        if pid in first:
            continue
        if max_prompts is not None and len(first) >= max_prompts:
            break
        first[pid] = index
        rows[index] = pid
    repeats = len(ids) - len(set(ids))
    kept = Gold([gold[pid] for pid in rows.values()], gold.path)
    plan = PromptPlan(kept, rows, mode=mode, repeats=repeats)
    if tokens is not None:
        plan.sources = {index: tuple(tokens[index]) for index in rows}
    return plan


def source_rows(dataset) -> List[Tuple[int, ...]]:
    """Every row's source token ids, as the dataset's collater puts them in a batch (minus padding)."""
    return [tuple(dataset[i]["source"].tolist()) for i in range(len(dataset))]


def plan_dataset(dataset, src_dict, gold: Gold, *, mode: str = "id", max_prompts: Optional[int] = None,
                 split: str = "valid", remove_bpe: Optional[str] = None, detok: Optional[str] = "space",
                 lang: Optional[str] = None) -> PromptPlan:
    """:func:`plan_prompts` for a fairseq translation dataset, decoding its sources like the hypotheses."""
    decode = TextDecoder(src_dict, remove_bpe, detok, lang)
    tokens = source_rows(dataset)
    sources = [decode(torch.tensor(row, dtype=torch.long)) for row in tokens]
    return plan_prompts(sources, gold, mode, max_prompts, split, tokens, unk=src_dict.unk_string())


def select_rows(sample: Mapping[str, Any], positions: Sequence[int]) -> Dict[str, Any]:
    """The part of a translation batch that generation needs, restricted to ``positions``."""
    net_input = sample["net_input"]
    if len(positions) == len(sample["id"]):
        return {"id": sample["id"], "net_input": {"src_tokens": net_input["src_tokens"],
                                                  "src_lengths": net_input["src_lengths"]}}
    index = torch.tensor(positions, dtype=torch.long, device=sample["id"].device)
    return {"id": sample["id"].index_select(0, index),
            "net_input": {"src_tokens": net_input["src_tokens"].index_select(0, index.to(net_input["src_tokens"].device)),
                          "src_lengths": net_input["src_lengths"].index_select(0, index.to(net_input["src_lengths"].device))}}


class NBestGenerator:
    """A batched beam search over ``models`` and the text post-processing of its hypotheses.

    The generator keeps references to the models, so built once on the model being trained it
    always decodes with the current parameters (as fairseq's ``--eval-bleu`` does).
    """

    def __init__(self, task, models: Sequence, options: NBestOptions):
        self.task, self.models, self.options = task, list(models), options
        self.generator = task.build_generator(self.models, options.generator_args())
        self.decode = TextDecoder(task.target_dictionary, options.remove_bpe, options.detok,
                                  getattr(task.cfg, "target_lang", None))

    def __call__(self, sample: Mapping[str, Any], plan: PromptPlan) -> NBest:
        """The n-best lists of the batch rows that ``plan`` scores (nothing else is generated)."""
        positions, prompts = plan.batch_rows(sample, self.task.source_dictionary.pad())
        if not positions:
            return {}
        batch = select_rows(sample, positions)
        with torch.no_grad():
            hypos = self.task.inference_step(self.generator, self.models, batch)
        out: NBest = {}
        for prompt, beam in zip(prompts, hypos):
            out[prompt] = [Hyp(self.decode(h["tokens"]), float(utils.item(h["score"])))
                           for h in beam[: self.options.size]]
        return out


def valid_batches(task, models: Sequence, cfg, subset: str):
    """Batches of ``subset`` exactly as ``fairseq-train`` validates it (one worker), from the run's config."""
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_tokens=cfg.dataset.max_tokens_valid,
        max_sentences=cfg.dataset.batch_size_valid,
        max_positions=utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in models]),
        ignore_invalid_inputs=cfg.dataset.skip_invalid_size_inputs_valid_test,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple,
        seed=cfg.common.seed,
        num_workers=cfg.dataset.num_workers,
        epoch=1,
        data_buffer_size=cfg.dataset.data_buffer_size,
        disable_iterator_cache=True,
    )
    return itr.next_epoch_itr(shuffle=False, set_dataset_epoch=False)


def generate_nbest(task, models: Sequence, cfg, subset: Optional[str] = None,
                   options: Optional[NBestOptions] = None, use_cuda: Optional[bool] = None) -> NBest:
    """n-best lists of every prompt the task's plan scores on ``subset`` (default: the task's n-best
    subset), in gold order, from ``models`` in eval mode. ``task`` is a ``translation_nbest`` task
    (it holds the gold and the plan); ``cfg`` the run's config (batching, as in validation)."""
    subset = subset or task.nbest_subset
    if subset not in task.datasets:
        task.load_dataset(subset, combine=False, epoch=1)
    plan = task.plan
    if plan is None:
        raise InputError("the task has no gold to score against: give --nbest-gold (task.nbest_gold)")
    options = options or task.nbest_options
    use_cuda = torch.cuda.is_available() and not cfg.common.cpu if use_cuda is None else use_cuda
    for model in models:
        model.eval()
        if use_cuda:
            model.cuda()
    generate = NBestGenerator(task, models, options)
    nbest: NBest = {}
    for sample in valid_batches(task, models, cfg, subset):
        if use_cuda:
            sample = utils.move_to_cuda(sample)
        for prompt, hyps in generate(sample, plan).items():
            nbest.setdefault(prompt, hyps)
    return {pid: nbest[pid] for pid in plan.gold.ids() if pid in nbest}


def load_checkpoint(path: str, overrides: Optional[Dict[str, Any]] = None):
    """``(models, cfg, task)`` from a ``translation_nbest`` checkpoint; ``overrides`` replace task
    options (e.g. ``{"data": ..., "nbest_gold": ...}`` when the files moved). Scoring a checkpoint
    writes no n-best files unless ``overrides`` names an ``nbest_save_dir``."""
    import nbest_eval.fairseq_task  # noqa: F401  (registers the task)

    overrides = {"nbest_save_dir": None, **(overrides or {})}
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=overrides)
    return models, cfg, task


def checkpoint_nbest(path: str, data_bin: str, gold_path: str, *, subset: str = "valid", beam: int = 10,
                     nbest_size: Optional[int] = None, max_len_a: float = 0.0, max_len_b: int = 200,
                     lenpen: float = 1.0, remove_bpe: Optional[str] = None, detok: str = "space") -> NBest:
    """The n-best lists of a saved ``translation_nbest`` checkpoint on ``subset`` of ``data_bin``,
    generated and post-processed exactly as validation does (``nbest-eval select --fairseq-data``)."""
    options = NBestOptions(beam=beam, size=nbest_size, max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen,
                           remove_bpe=remove_bpe, detok=detok)
    with warnings.catch_warnings():
        # known and harmless: the full-load opt-in (see allow_full_checkpoint_load) is deliberate, and
        # fairseq asks for pinned memory even on a CPU
        warnings.filterwarnings("ignore", message=".*TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
        warnings.filterwarnings("ignore", message=".*'pin_memory' argument is set as true")
        models, cfg, task = load_checkpoint(path, {"data": data_bin, "nbest_gold": gold_path, "valid_subset": subset})
        return generate_nbest(task, models, cfg, subset, options)
