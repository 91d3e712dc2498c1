"""n-best lists from fairseq models: batched beam search over a dataset -> ``{prompt_id: [Hyp]}``.

Shared by the ``translation_nbest`` training task (:mod:`nbest_eval.fairseq.task`), which scores
the model being trained at every validation, and by anything that scores saved checkpoints
afterwards: both go through :class:`NBestGenerator` with the same :class:`NBestOptions`, so a
checkpoint re-scored later gives the values logged when it was saved::

    models, cfg, task = load_ensemble("checkpoints/checkpoint_best.pt")     # nbest_eval.fairseq.checkpoints
    nbest = generate_nbest(task, models, cfg)                                # the valid split
    values = task.scorer.score(task.plan.gold, nbest).values

Generation is fairseq's own :class:`~fairseq.sequence_generator.SequenceGenerator`, one call per
batch; only the text post-processing (``--nbest-remove-bpe``, ``--nbest-detok``) runs per hypothesis.
Valid sentences are matched to gold prompts by :func:`nbest_eval.training.matching.match_prompts`. Hypothesis scores are
fairseq's natural-log scores, length-normalized with ``lenpen`` as ``fairseq-generate`` prints them
(before its division by ln 2).

This module imports torch and fairseq; the metric core (``nbest_eval`` itself, the scorer, metrics
and formats) never does.
"""

from __future__ import annotations

import logging
import time
import warnings
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from fairseq import utils
from fairseq.data import encoders

from ..data import Gold, Hyp, InputError, NBest
from ..scorer import GEN_SECONDS, NBEST_OVERHEAD, SCORE_SECONDS
from ..stats import Stats
from ..training.generation import DECLARED, GenerationSettings
from ..training.matching import OptionNames, PromptMatch, match_prompts

logger = logging.getLogger(__name__)

#: the task's spelling of the settings that a prompt-matching error advises
OPTION_NAMES = OptionNames(order="--nbest-map order",
                           undo="--nbest-remove-bpe / --nbest-detok undo the source preprocessing")


@dataclass(frozen=True)
class _Options(GenerationSettings):
    """How n-best lists are generated (:class:`~nbest_eval.training.generation.GenerationSettings`)
    and post-processed: the task's ``--nbest-*`` options."""

    remove_bpe: Optional[str] = None
    detok: str = "space"

    def __post_init__(self):
        self.check(lambda setting: "--" + setting.fairseq_name.replace("_", "-"))

    @classmethod
    def from_cfg(cls, cfg: Any) -> NBestOptions:
        """From a ``translation_nbest`` task config (or any object with the ``nbest_*`` attributes)."""
        return cls(**{s.name: getattr(cfg, s.fairseq_name) for s in DECLARED.values()},
                   remove_bpe=cfg.nbest_remove_bpe, detok=cfg.nbest_detok)

    def generator_args(self) -> Namespace:
        """Arguments for :meth:`fairseq.tasks.FairseqTask.build_generator` (a plain beam search)."""
        return Namespace(beam=self.beam, max_len_a=self.max_len_a, max_len_b=self.max_len_b,
                         lenpen=self.lenpen)


class NBestOptions(_Options):
    __doc__ = _Options.__doc__

    def __init__(self, *args: Any, size: Optional[int] = None, **kwargs: Any):
        """``size=``: 0.5.0's keyword for ``nbest_size``, accepted with a DeprecationWarning until 0.7
        (the fields keep 0.5.0's order, so positional arguments mean what they meant)."""
        if size is not None:
            warnings.warn("NBestOptions(size=...) is NBestOptions(nbest_size=...) since 0.6.0; size= goes in 0.7",
                          DeprecationWarning, stacklevel=2)
            kwargs["nbest_size"] = size
        super().__init__(*args, **kwargs)


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
class PromptPlan(PromptMatch):
    """A :class:`~nbest_eval.training.matching.PromptMatch` over a dataset's rows, plus those rows' source token
    ids, so that a batch row whose index is a scored row's but whose tokens differ (a padding batch
    from another split) is not mistaken for it."""

    sources: Dict[int, Tuple[int, ...]] = field(default_factory=dict, repr=False)

    def batch_rows(self, sample: Mapping[str, Any], pad: int) -> Tuple[List[int], List[str]]:
        """Positions in ``sample`` to generate for, and their prompt ids."""
        positions, prompts = [], []
        src_tokens = sample["net_input"]["src_tokens"]
        for position, index in enumerate(sample["id"].tolist()):
            prompt = self.rows.get(index)
            if prompt is None:
                continue
            row = src_tokens[position]
            if tuple(row[row.ne(pad)].tolist()) != self.sources[index]:
                continue
            positions.append(position)
            prompts.append(prompt)
        return positions, prompts


def source_rows(dataset) -> List[Tuple[int, ...]]:
    """Every row's source token ids, as the dataset's collater puts them in a batch (minus padding)."""
    return [tuple(dataset[i]["source"].tolist()) for i in range(len(dataset))]


def plan_dataset(dataset, src_dict, gold: Gold, *, mode: str = "id", max_prompts: Optional[int] = None,
                 split: str = "valid", remove_bpe: Optional[str] = None, detok: Optional[str] = "space",
                 lang: Optional[str] = None) -> PromptPlan:
    """Match a fairseq translation dataset's sources, decoded like the hypotheses, to the gold."""
    decode = TextDecoder(src_dict, remove_bpe, detok, lang)
    tokens = source_rows(dataset)
    sources = [decode(torch.tensor(row, dtype=torch.long)) for row in tokens]
    match = match_prompts(sources, gold, mode, max_prompts, f"the '{split}' split", unk=src_dict.unk_string(),
                          names=OPTION_NAMES)
    return PromptPlan(**vars(match), sources={index: tuple(tokens[index]) for index in match.rows})


def select_rows(sample: Mapping[str, Any], positions: Sequence[int]) -> Dict[str, Any]:
    """The part of a translation batch that generation needs, restricted to ``positions``."""
    net_input = sample["net_input"]
    if len(positions) == len(sample["id"]):
        return {"id": sample["id"], "net_input": {"src_tokens": net_input["src_tokens"],
                                                  "src_lengths": net_input["src_lengths"]}}
    index = torch.tensor(positions, dtype=torch.long, device=sample["id"].device)

    def rows(tensor):
        return tensor.index_select(0, index.to(tensor.device))

    return {"id": rows(sample["id"]),
            "net_input": {"src_tokens": rows(net_input["src_tokens"]), "src_lengths": rows(net_input["src_lengths"])}}


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

    def __call__(self, sample: Mapping[str, Any], plan: PromptPlan,
                 on_list: Optional[Callable[[str, List[Hyp], int], None]] = None) -> NBest:
        """The n-best lists of the batch rows that ``plan`` scores (nothing else is generated).

        ``on_list(prompt_id, hyps, left)`` gets each list as soon as it is decoded, with the number
        of lists still to decode (the task hands lists to the scoring process, which scores them
        while the rest is decoded)."""
        positions, prompts = plan.batch_rows(sample, self.task.source_dictionary.pad())
        if not positions:
            return {}
        batch = select_rows(sample, positions)
        with torch.no_grad():
            hypos = self.task.inference_step(self.generator, self.models, batch)
        out: NBest = {}
        for done, (prompt, beam) in enumerate(zip(prompts, hypos), 1):
            out[prompt] = [Hyp(self.decode(h["tokens"]), float(utils.item(h["score"])))
                           for h in beam[: self.options.size]]
            if on_list is not None:
                on_list(prompt, out[prompt], len(prompts) - done)
        return out


#: the seconds a batch's generation and scoring take (:attr:`BatchScore.seconds`' keys)
TIMINGS = (GEN_SECONDS, SCORE_SECONDS, NBEST_OVERHEAD)


class BatchScore(NamedTuple):
    """One valid batch generated and scored: its statistics, seconds (generating, scoring, beyond
    generation), each prompt's statistics and the n-best lists."""

    stats: Stats
    seconds: Dict[str, float]
    per_prompt: List[Tuple[str, Stats]]
    nbest: NBest


def score_batch(generate: NBestGenerator, plan: PromptPlan, tally, sample: Mapping[str, Any]) -> BatchScore:
    """Generate ``sample``'s lists and score them on ``tally`` (a fresh
    :meth:`~nbest_eval.processes.pipeline.ScoringProcess.tally`): what the training task's valid step
    and the sidecar's evaluator both do with a batch, so that both give the same statistics.

    The lists go to the scoring process as they are decoded, so they are scored while the next ones
    are decoded: half of what is left at a time (a hand-over costs about as much as scoring a list,
    and the last one holds one list, the only one scored after decoding). The total then waits for
    the last scores, summed in batch order as a sequential loop sums them. Each batch is complete in
    itself: nothing is left pending for a later one, which fairseq might zero (a padding batch's
    logging output is ignored) or never run (``--max-valid-steps``)."""
    pending, handing_s = [], 0.0

    def hand_over(prompt: str, hyps: List[Hyp], left: int) -> None:
        nonlocal handing_s
        pending.append((plan.gold[prompt], hyps))
        if len(pending) >= left:
            before = time.perf_counter()
            tally.add(pending)
            pending.clear()
            handing_s += time.perf_counter() - before

    start = time.perf_counter()
    nbest = generate(sample, plan, hand_over)
    gen_s = time.perf_counter() - start - handing_s
    stats, score_s, per_prompt = tally.total()
    overhead_s = time.perf_counter() - start - gen_s
    return BatchScore(stats, {GEN_SECONDS: gen_s, SCORE_SECONDS: score_s, NBEST_OVERHEAD: overhead_s}, per_prompt,
                      nbest)


def valid_batches(task, models: Sequence, cfg, subset: str, num_shards: int = 1, shard_id: int = 0):
    """Batches of ``subset`` exactly as ``fairseq-train`` validates it, from the run's config: worker
    ``shard_id``'s of ``num_shards`` (as ``Trainer.get_valid_iterator`` shards them: every ``num_shards``-th
    batch, and an empty one, ``{}``, where a worker has a batch fewer than the first)."""
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_tokens=cfg.dataset.max_tokens_valid,
        max_sentences=cfg.dataset.batch_size_valid,
        max_positions=utils.resolve_max_positions(task.max_positions(), *[m.max_positions() for m in models]),
        ignore_invalid_inputs=cfg.dataset.skip_invalid_size_inputs_valid_test,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple,
        seed=cfg.common.seed,
        num_shards=num_shards,
        shard_id=shard_id,
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
