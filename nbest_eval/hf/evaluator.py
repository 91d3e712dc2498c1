"""The evaluator: generation + scoring of beam n-best lists, no Trainer needed."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import random
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.generation.utils import ALL_CACHE_NAMES

from ..data import Gold, GoldPrompt, Hyp, InputError
from ..files.output import PathLike
from ..formats import read_gold
from ..metrics.base import N_PROMPTS
from ..processes import pipeline
from ..scorer import VALIDATION_METRICS, Scorer
from ..significance import PerPrompt
from ..stats import Stats
from ..training.distributed import all_reduce, gather_to_rank0, world
from ..training.generation import GenerationSettings
from ..training.matching import OptionNames, match_prompts
from .beam_search import beam_search, choose_search, own_cache_fits, resolved_config, stands_in
from .distributed import model_device
from .positions import ARGUMENT_NAMES, LengthNames, check_lengths
from .result import NBestResult

logger = logging.getLogger(__name__)
#: the generation settings' defaults (:mod:`nbest_eval.training.generation`), here in transformers' names
DEFAULTS = GenerationSettings()

#: the evaluator's spelling of what a prompt-mismatch message advises
OPTION_NAMES = OptionNames(order="prompt_map='order'",
                           undo="the prompts are the source texts as written (preprocess= applies after matching)")

#: a CUDA batch's token budget (prompts x beams x longest source) when neither batch_size nor
#: batch_tokens is given: many more prompts a batch than a CPU wants, within a small card's memory
DEFAULT_CUDA_BATCH_TOKENS = 65536
#: prompts a batch on any other device when neither is given
DEFAULT_BATCH_SIZE = 32
#: the precisions generation can run in, and the autocast dtype of each (None: no autocast)
PRECISIONS: Dict[str, Optional[torch.dtype]] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def device_batching(device: Any) -> Tuple[Optional[int], Optional[int]]:
    """(batch_size, batch_tokens) when neither is given, for generation on ``device``: a token budget
    that fills a GPU, else :data:`DEFAULT_BATCH_SIZE` prompts, so that a CPU keeps the batches, hence
    the lists, of the versions before the budget."""
    if torch.device(device).type == "cuda":
        return None, DEFAULT_CUDA_BATCH_TOKENS
    return DEFAULT_BATCH_SIZE, None


def token_batches(lengths: Sequence[int], beams: int, batch_size: Optional[int],
                  batch_tokens: Optional[int]) -> List[List[int]]:
    """Indices of sources of ``lengths`` tokens in generate batches: longest first, ties in index
    order, each batch filled while it has at most ``batch_size`` prompts and prompts x ``beams`` x
    its longest source stays within ``batch_tokens`` (None: no such bound); a prompt always fits alone."""
    def fits(batch: List[int]) -> bool:
        n = len(batch) + 1
        return (batch_size is None or n <= batch_size) and \
            (batch_tokens is None or n * beams * lengths[batch[0]] <= batch_tokens)

    batches: List[List[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        if batches and fits(batches[-1]):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def resolve_prompts(gold: Gold, prompts: Any, prompt_map: str = "id", max_prompts: Optional[int] = None
                    ) -> List[GoldPrompt]:
    """The gold prompts to translate, in order: every gold prompt (``prompts=None``), or the gold
    prompts of the given source texts (a list, or a file with one text a line, e.g. ``valid.src``),
    matched as the fairseq task matches its valid lines (:func:`nbest_eval.training.matching.match_prompts`)."""
    if prompts is None:
        texts, what = [p.text for p in gold], "the gold's prompts"
    elif isinstance(prompts, (str, os.PathLike)):
        source = os.fspath(prompts)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read the prompts file: {getattr(err, 'strerror', None) or err}", source) from None
        texts = [line.removesuffix("\r") for line in text.split("\n")]
        if texts and texts[-1] == "":
            texts.pop()
        what = f"the prompts file {source}"
    else:
        texts, what = list(prompts), "the prompts"
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise InputError(f"prompts must be strings (source texts), got {type(bad).__name__}")
    match = match_prompts(texts, gold, prompt_map, max_prompts, what, names=OPTION_NAMES)
    (logger.warning if match.unmatched else logger.info)("n-best evaluation: %s: %s", what, match.summary())
    return list(match.gold)


class Search(NamedTuple):
    """How the evaluator calls ``generate`` (:meth:`NBestEvaluator.search`): these arguments, plus a
    fresh :class:`BeamCache` for each batch if ``beam_cache``."""

    kwargs: Dict[str, Any]
    beam_cache: bool


class NBestEvaluator:
    """Translates prompts into beam n-best lists and scores them against a STAPLE gold.

    Args:
        gold: a STAPLE gold file or a parsed :class:`~nbest_eval.data.Gold`.
        tokenizer: the model's tokenizer (``__call__``, ``batch_decode``, ``pad_token_id``); may be
            set later (the callback takes the Trainer's ``processing_class``).
        prompts: the source texts to translate: None (every gold prompt, in gold order), a list of
            texts, or a file with one text a line (e.g. ``valid.src``). Matched to the gold as the
            fairseq task matches its valid lines: ``prompt_map`` ``"id"`` (the prompt with that
            text, else by STAPLE id; gold prompts named by no text are left out, with a warning) or
            ``"order"`` (text i is gold prompt i); every text must be a gold prompt; a repeated
            text is scored once.
            ``max_prompts`` keeps the first N distinct prompts.
        num_beams / num_return_sequences: beam size and n-best length (default: ``num_beams``).
        max_new_tokens, length_penalty: passed to ``generate``; ``generation_kwargs`` adds or
            overrides any other ``generate`` argument (``output_scores`` and
            ``return_dict_in_generate`` are always on: they give ``sequences_scores``). The
            defaults of ``num_beams``, ``num_return_sequences`` and ``length_penalty`` are
            :class:`~nbest_eval.training.generation.GenerationSettings`', declared once for every adapter.
        metrics: metric keys (list or ``"map,wf1"``) or a ready :class:`~nbest_eval.scorer.Scorer`;
            ``scorer_options`` are the Scorer's keyword arguments (``bleu_tokenize``, ``wf1_top``...).
            Scoring runs in a helper process beside generation (:mod:`nbest_eval.processes.pipeline`), which
            builds its own scorer from the scorer's keys and ``options``.
        batch_size / batch_tokens: how many prompts a ``generate`` call takes: at most
            ``batch_size``, and as many as keep prompts x ``num_beams`` x the batch's longest source
            (in tokens) within ``batch_tokens`` (a prompt always fits alone); None: no such bound.
            With neither given, they are chosen on the model's device at the first generation:
            :data:`DEFAULT_CUDA_BATCH_TOKENS` on a CUDA device, else :data:`DEFAULT_BATCH_SIZE`
            prompts; ``settings`` (and the record of each checkpoint) then holds the chosen values,
            so that ``nbest-eval select`` makes the same batches. Prompts are sorted by length into
            batches (longest first), and the batches dealt to ranks, so a prompt's batch, hence
            its n-best list, does not depend on the number of processes.
        precision: ``"bf16"`` or ``"fp16"``: generate under ``torch.autocast`` in that dtype (the
            mixed precision a Trainer trains in: the callback sets it from ``bf16=``/``fp16=``);
            ``"fp32"``: without autocast, even inside an enclosing one; None: as the model is.
        subset_size / subset_seed: score a fixed random subset of the prompts (the same at every
            evaluation, kept in prompt order) for cheaper validation.
        max_source_length: truncate sources to this many tokens (default: no truncation).
        max_len_a / max_len_b: fairseq-style length limit: each batch generates at most
            ``max_len_a * (its longest source) + max_len_b`` new tokens (overrides max_new_tokens;
            the one not given counts 0).
        preprocess: applied to each prompt text before tokenization (e.g. a T5 task prefix).
        postprocess: applied to each decoded hypothesis (detokenization); default ``str.strip``.
        decode_kwargs: for ``tokenizer.batch_decode`` (default ``skip_special_tokens=True``).

    An encoder-decoder's beam search runs :func:`nbest_eval.hf.beam_search.beam_search`, transformers'
    search with each prompt dropped from the batch once its list is final (the same lists, in less
    time than ``generate``'s own search: BENCHMARKS.md), and a cache that
    does not reorder the cross-attention keys and values (:class:`BeamCache`); ``generation_kwargs``
    may name another ``custom_generate`` (``None``: transformers' own search) or cache. Both are used
    only where they give ``generate``'s own lists (:meth:`search`): settings that ask for another
    search (group or constrained beam search, sampling) or another cache (``use_cache=False``, a
    ``cache_implementation``), in ``generation_kwargs`` or the model's ``generation_config.json``,
    run transformers' own search, or are refused as transformers refuses them.
    Greedy search (``num_beams=1``) gives no ``sequences_scores``: hypotheses then have no score.
    Models whose parameters are sharded across ranks (FSDP, DeepSpeed ZeRO-3) are not supported:
    ranks generate different numbers of batches, which sharded forward passes cannot do.
    """

    def __init__(self, gold: Union[PathLike, Gold], tokenizer: Any = None, prompts: Any = None, *,
                 num_beams: int = DEFAULTS.beam, num_return_sequences: Optional[int] = DEFAULTS.nbest_size,
                 max_new_tokens: Optional[int] = 64, length_penalty: float = DEFAULTS.lenpen,
                 generation_kwargs: Optional[Mapping[str, Any]] = None,
                 metrics: Union[str, Sequence[str], Scorer] = VALIDATION_METRICS,
                 scorer_options: Optional[Mapping[str, Any]] = None, batch_size: Optional[int] = None,
                 batch_tokens: Optional[int] = None, precision: Optional[str] = None,
                 prompt_map: str = "id", max_prompts: Optional[int] = None,
                 subset_size: Optional[int] = None, subset_seed: int = 0,
                 max_source_length: Optional[int] = None, max_len_a: Optional[float] = None,
                 max_len_b: Optional[int] = None,
                 preprocess: Optional[Callable[[str], str]] = None,
                 postprocess: Optional[Callable[[str], str]] = None,
                 decode_kwargs: Optional[Mapping[str, Any]] = None):
        given = {name: value for name, value in locals().items() if name in SETTINGS}
        if isinstance(gold, Gold):
            self.full_gold = gold
        elif isinstance(gold, (str, os.PathLike)):
            if not os.path.isfile(gold):
                raise InputError("the gold file does not exist or is not a file", os.fspath(gold))
            self.full_gold = read_gold(gold)
        else:
            raise InputError(f"gold must be a path or a nbest_eval.Gold, got {type(gold).__name__}")
        if not len(self.full_gold):
            raise InputError("the gold has no prompt", self.full_gold.path)
        num_return_sequences = _checked_size(num_beams, num_return_sequences)
        for name, value in (("batch_size", batch_size), ("batch_tokens", batch_tokens)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InputError(f"{name} must be a number >= 1 or None, got {value!r:.40}")
        self.num_beams, self.num_return_sequences = num_beams, num_return_sequences
        self.batch_size, self.batch_tokens = batch_size, batch_tokens

        if isinstance(metrics, Scorer):
            if scorer_options:
                raise InputError("give scorer_options or a ready Scorer, not both")
            self.scorer = metrics
        else:
            self.scorer = Scorer(metrics, **(scorer_options or {}))

        prompts_list = resolve_prompts(self.full_gold, prompts, prompt_map, max_prompts)
        if subset_size is not None:
            if subset_size < 1:
                raise InputError(f"subset_size must be >= 1, got {subset_size}")
            if subset_size < len(prompts_list):
                keep = sorted(random.Random(subset_seed).sample(range(len(prompts_list)), subset_size))
                prompts_list = [prompts_list[i] for i in keep]
        #: the prompts scored at every evaluation, in order, and their gold
        self.prompts: List[GoldPrompt] = prompts_list
        self.gold = Gold(prompts_list, self.full_gold.path)

        self.generate_kwargs: Dict[str, Any] = {"num_beams": num_beams,
                                                "num_return_sequences": num_return_sequences,
                                                "length_penalty": length_penalty, "do_sample": False}
        if max_new_tokens is not None:
            self.generate_kwargs["max_new_tokens"] = max_new_tokens
        self.generate_kwargs.update(generation_kwargs or {})
        self.generate_kwargs.update(output_scores=True, return_dict_in_generate=True)
        self.max_source_length = max_source_length
        self.max_len = None if max_len_a is None and max_len_b is None else (max_len_a or 0.0, max_len_b or 0)
        self.preprocess = preprocess
        self.postprocess = postprocess if postprocess is not None else str.strip
        self.decode_kwargs = {"skip_special_tokens": True, **dict(decode_kwargs or {})}
        self.tokenizer = tokenizer
        self._encoded: Optional[Tuple[int, List[List[int]]]] = None  # (id(tokenizer), token ids per prompt)
        self._scoring: Optional[pipeline.Scoring] = None
        #: every setting (:data:`SETTINGS`) as given, the n-best size and the scorer resolved: with
        #: ``prompts``, what another evaluator needs to give the same lists and scores
        self.settings: Dict[str, Any] = {**given, "num_return_sequences": num_return_sequences,
                                         "metrics": list(self.scorer.keys), "scorer_options": self.scorer.options}
        self.precision: Optional[str] = None
        self.use_precision(precision)
        self._searches_said: set = set()  # the (device type, dtype) pairs whose search choice was logged

    def use_precision(self, precision: Optional[str]) -> None:
        """Generate in ``precision`` from now on (see the class docstring), recorded in ``settings``."""
        if precision is not None and precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)} or None (as the model is), "
                             f"got {precision!r:.40}")
        self.precision = self.settings["precision"] = precision

    def size_batches(self, device: Any) -> None:
        """With neither ``batch_size`` nor ``batch_tokens`` given, choose them for ``device`` now, once
        (:func:`device_batching`), and record them in ``settings``: later batches, on any device,
        and evaluators rebuilt from the record, keep these."""
        if self.batch_size is None and self.batch_tokens is None:
            self.batch_size, self.batch_tokens = device_batching(device)
            self.settings.update(batch_size=self.batch_size, batch_tokens=self.batch_tokens)
            logger.info("n-best evaluation batches on %s: batch_size %s, batch_tokens %s", torch.device(device).type,
                        self.batch_size, self.batch_tokens)

    # -- generation -----------------------------------------------------------------------------

    def _encode(self) -> List[List[int]]:
        if self.tokenizer is None:
            raise InputError("NBestEvaluator has no tokenizer: pass tokenizer=, or give the Trainer a "
                             "processing_class")
        if self._encoded is None or self._encoded[0] != id(self.tokenizer):
            texts = [self.preprocess(p.text) if self.preprocess else p.text for p in self.prompts]
            kwargs: Dict[str, Any] = {}
            if self.max_source_length:
                kwargs.update(truncation=True, max_length=self.max_source_length)
            ids = self.tokenizer(texts, **kwargs)["input_ids"]
            self._encoded = (id(self.tokenizer), [list(x) for x in ids])
        return self._encoded[1]

    def batches(self, model: Any = None) -> List[List[int]]:
        """Prompt indices grouped into generate batches (:func:`token_batches`): longest sources
        first, ties in prompt order. ``model``: the model that generates them, whose device sizes
        the batches when neither ``batch_size`` nor ``batch_tokens`` was given (:meth:`size_batches`).

        Batches, not prompts, are dealt to ranks (batch ``b`` to rank ``b % world``), so a prompt is
        always generated with the same neighbours whatever the number of processes.
        """
        if model is not None:
            self.size_batches(model_device(model))
        if self.batch_size is None and self.batch_tokens is None:
            raise RuntimeError("the batches are sized on the model's device: pass the model, or set batch_size "
                               "or batch_tokens")
        return token_batches([len(ids) for ids in self._encode()], self.generate_kwargs["num_beams"],
                             self.batch_size, self.batch_tokens)

    def generate(self, model: Any, indices: Optional[Sequence[int]] = None) -> List[List[Hyp]]:
        """The n-best lists of the prompts at ``indices`` (default all) on this process, in that order.

        Batched as :meth:`evaluate` does (:meth:`batches`), so with ``indices=None`` the lists are the
        ones an evaluation scores (batch composition matters when ``max_len_a`` > 0, and for padding);
        a subset keeps each prompt's batch order but drops the prompts not asked for.
        """
        self.check_lengths(model)
        indices = list(range(len(self._encode()))) if indices is None else list(indices)
        wanted = set(indices)
        batches = [[i for i in batch if i in wanted] for batch in self.batches(model)]
        out = dict(zip((i for batch in batches for i in batch), self._generate_batches(model, batches)))
        return [out[i] for i in indices]

    def _generate_batches(self, model: Any, batches: Sequence[Sequence[int]]) -> List[List[Hyp]]:
        """The n-best lists of the prompts of ``batches``, batch after batch, with ``model`` in eval mode."""
        encoded, search = self._encode(), self.search(model)
        hyps: List[List[Hyp]] = []
        with _eval_mode(model), self.autocast(model_device(model)):
            for batch in batches:
                if batch:
                    hyps += self._generate_batch(model, [encoded[i] for i in batch], search)
        return hyps

    def search(self, model: Any) -> Search:
        """How ``model`` generates: the pruning search (:func:`.beam_search.beam_search`) and a
        :class:`BeamCache` only where they give ``generate``'s own lists, decided on the settings
        ``generate`` resolves (``generation_kwargs`` over the model's ``generation_config.json``);
        anything else (group or constrained beam search, ``use_cache=False``...) is left to
        transformers' search, and what it would refuse is refused now (InputError), not at the first batch.
        Where the pruning search could run, :func:`.beam_search.choose_search` picks it or transformers'
        for the device and :meth:`generation_dtype`, logged once per pair."""
        kwargs = dict(self.generate_kwargs)
        where = "generation_kwargs and the model's generation_config.json"
        try:
            config = resolved_config(model, kwargs)
            mode = config.get_generation_mode(kwargs.get("assistant_model"))
            model._get_deprecated_gen_repo(mode, kwargs.get("trust_remote_code"), kwargs.get("custom_generate"))
        except ValueError as err:  # what generate would raise at the first evaluation
            raise InputError(f"transformers refuses these generation settings ({where}): {err}") from None
        if "custom_generate" not in kwargs and stands_in(model, config, kwargs) and self._prunes(model):
            kwargs["custom_generate"] = beam_search
        fresh_cache = own_cache_fits(model, config) and not any(name in kwargs for name in ALL_CACHE_NAMES)
        return Search(kwargs, fresh_cache)

    def autocast(self, device: Any) -> Any:
        """The context generation runs in on ``device``: autocast in :attr:`precision`'s dtype, autocast
        off for ``"fp32"``, nothing for None; InputError where torch cannot autocast so there."""
        if self.precision is None:
            return contextlib.nullcontext()
        dtype, kind = PRECISIONS[self.precision], torch.device(device).type
        with warnings.catch_warnings():
            # torch warns (a UserWarning), then runs without autocast, for a dtype it lacks
            warnings.simplefilter("error", UserWarning)
            try:
                return torch.autocast(kind, dtype=dtype, enabled=dtype is not None)
            except (RuntimeError, UserWarning) as err:
                raise InputError(f"precision={self.precision!r}: torch cannot autocast to it on {kind} "
                                 f"({str(err).splitlines()[0]})") from None

    def _prunes(self, model: Any) -> bool:
        """Whether the pruning search is the faster one for ``model`` (:func:`.beam_search.choose_search`)."""
        device, dtype = model_device(model), self.generation_dtype(model)
        pruning, reason = choose_search(device, dtype)
        if (device.type, dtype) not in self._searches_said:
            self._searches_said.add((device.type, dtype))
            logger.info("%s", reason)
        return pruning

    def generation_dtype(self, model: Any) -> torch.dtype:
        """The dtype ``model`` generates in: :attr:`precision`'s autocast dtype, else its parameters'."""
        dtype = PRECISIONS[self.precision] if self.precision is not None else None
        return dtype or getattr(model, "dtype", torch.float32)

    def _generate_batch(self, model: Any, sources: List[List[int]], search: Search) -> List[List[Hyp]]:
        results: List[List[Hyp]] = [[] for _ in sources]
        live = [i for i, ids in enumerate(sources) if ids]  # a source with no token gets no hypothesis
        if not live:
            return results
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = getattr(self.tokenizer, "eos_token_id", None) or 0
        encoder_decoder = bool(getattr(getattr(model, "config", None), "is_encoder_decoder", True))
        width = max(len(sources[i]) for i in live)
        input_ids = torch.full((len(live), width), pad, dtype=torch.long)
        attention = torch.zeros((len(live), width), dtype=torch.long)
        for row, i in enumerate(live):
            ids = torch.tensor(sources[i], dtype=torch.long)
            if encoder_decoder:  # right padding for encoders, left padding for decoder-only models
                input_ids[row, :len(ids)], attention[row, :len(ids)] = ids, 1
            else:
                input_ids[row, width - len(ids):], attention[row, width - len(ids):] = ids, 1
        device = model_device(model)
        kwargs = dict(search.kwargs)
        if search.beam_cache:
            kwargs[ALL_CACHE_NAMES[0]] = _beam_cache()
        if self.max_len is not None:
            kwargs["max_new_tokens"] = self._max_new_tokens(width)
            kwargs.pop("max_length", None)
        with torch.no_grad():
            output = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs)
        sequences = output.sequences
        if not encoder_decoder:
            sequences = sequences[:, width:]
        texts = self.tokenizer.batch_decode(sequences, **self.decode_kwargs)
        seq_scores = getattr(output, "sequences_scores", None)
        scores = seq_scores.float().tolist() if seq_scores is not None else [None] * len(texts)
        n = self.generate_kwargs.get("num_return_sequences", 1)
        for row, i in enumerate(live):
            results[i] = [Hyp(self.postprocess(texts[row * n + j]), scores[row * n + j]) for j in range(n)]
        return results

    def _max_new_tokens(self, width: int) -> Optional[int]:
        """The new tokens a batch whose longest source has ``width`` tokens may generate (None: no bound set)."""
        if self.max_len is not None:
            return max(1, int(self.max_len[0] * width + self.max_len[1]))
        return self.generate_kwargs.get("max_new_tokens")

    def check_lengths(self, model: Any, names: LengthNames = ARGUMENT_NAMES) -> None:
        """Refuse (InputError naming the option to change, in the caller's ``names``) sources or
        generation lengths beyond ``model``'s positions (:func:`.positions.check_lengths`), which
        would fail deep in torch at the first evaluation, with "IndexError: index out of range in self"."""
        width = max(map(len, self._encode()), default=0)
        check_lengths(model, width, self._max_new_tokens(width), self.max_len, names)

    # -- evaluation -----------------------------------------------------------------------------

    def _all_prompts(self, mine: List[Tuple[str, Stats]], device: Any) -> PerPrompt:
        """Every prompt's statistics in prompt order, the same on every rank: each rank's rows
        (zeros elsewhere) summed across ranks. What an early-stopping rule resamples."""
        mine = PerPrompt.placed(self.scorer, [p.id for p in self.prompts], mine)
        if world()[1] == 1:
            return mine
        summed = all_reduce(mine.matrix.ravel().tolist(), "sum", device)
        return PerPrompt.from_matrix(self.scorer, mine.ids, np.array(summed).reshape(mine.matrix.shape))

    def start_scoring(self) -> pipeline.Scoring:
        """The scoring helper, started if it is not running. :meth:`evaluate` calls this; the
        callback calls it when training begins, so that the helper builds the gold's reference
        statistics while the model trains, not during the first evaluation."""
        self._scoring = pipeline.running(self._scoring, self.scorer, self.prompts)
        return self._scoring

    def close(self) -> None:
        """Stop the scoring helper now (it also stops when the evaluator is garbage-collected)."""
        if self._scoring is not None:
            self._scoring.close()
            self._scoring = None

    def evaluate(self, model: Any, *, gather_nbest: bool = False) -> NBestResult:
        """Generate this rank's batches, score them beside generation, all-reduce the statistics.

        Each batch's lists go to the scoring helper as soon as they exist, so batch k is scored
        while batch k+1 is generated; the statistics are then added in prompt order, exactly as a
        sequential loop adds them. ``gen_s`` is the time spent generating, ``score_s`` the helper's
        time scoring, ``overhead_s`` the rest of the wall time (handing lists over, waiting for the
        last batch's scores).

        Under ``torch.distributed`` every rank must call this (with the same prompts and settings);
        each generates the batches dealt to it (possibly none) on ``model``, which should be the
        unwrapped model. ``gather_nbest`` collects every list on rank 0 (``result.nbest``).
        """
        self.check_lengths(model)
        rank, size = world()
        my_batches = self.batches(model)[rank::size]
        mine: List[int] = [i for batch in my_batches for i in batch]
        search = self.search(model)
        tally = self.start_scoring().tally()
        encoded = self._encode()
        start, gen_s = time.perf_counter(), 0.0
        hyps: List[List[Hyp]] = []
        with _eval_mode(model), self.autocast(model_device(model)):
            for batch in my_batches:
                before = time.perf_counter()
                batch_hyps = self._generate_batch(model, [encoded[i] for i in batch], search)
                gen_s += time.perf_counter() - before
                tally.add([(self.prompts[i], h) for i, h in zip(batch, batch_hyps)])
                hyps += batch_hyps
        stats, score_s, per_prompt = tally.total()
        overhead_s = time.perf_counter() - start - gen_s
        device = model_device(model)
        names = self.scorer.stat_names
        total = Stats.from_vector(names, all_reduce(stats.to_vector(names), "sum", device))
        gen_s, score_s, overhead_s = all_reduce([gen_s, score_s, overhead_s], "max", device)
        result = NBestResult(self.scorer.values(total), total, gen_s, score_s, int(total[N_PROMPTS]),
                             overhead_s=overhead_s, per_prompt=self._all_prompts(per_prompt, device))
        if gather_nbest:
            parts = gather_to_rank0({self.prompts[i].id: h for i, h in zip(mine, hyps)})
            if parts is not None:
                merged = {k: v for part in parts for k, v in part.items()}
                result.nbest = {p.id: merged[p.id] for p in self.prompts if p.id in merged}
        return result


def _checked_size(num_beams: int, num_return_sequences: Optional[int]) -> int:
    """The n-best size (default: the beam), or InputError naming the argument that is out of range."""
    settings = GenerationSettings(beam=num_beams, nbest_size=num_return_sequences)
    settings.check(lambda setting: setting.hf_name)
    return settings.size


#: NBestEvaluator's settings: its keyword-only arguments, each of which changes the lists or the scores
SETTINGS: Tuple[str, ...] = tuple(name for name, parameter in inspect.signature(NBestEvaluator).parameters.items()
                                  if parameter.kind is parameter.KEYWORD_ONLY)


class BeamCache(EncoderDecoderCache):
    """An encoder-decoder's generation cache whose beam-search reordering leaves the cross-attention
    keys and values alone, as fairseq's beam search does: they come from the encoder output, which
    every beam of a prompt shares, and beams are only ever reordered within their prompt, so that
    reordering copies the whole cross-attention cache at every step for nothing (docs/experiments/hf-recipe.md
    measures what that costs). The lists are the same to the bit."""

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.self_attention_cache.reorder_cache(beam_idx)


def _beam_cache() -> BeamCache:
    return BeamCache(DynamicCache(), DynamicCache())


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """``model`` in eval mode meanwhile, back in training mode after if it was."""
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()
