"""Hugging Face integration: beam n-best validation inside a ``Trainer`` / ``Seq2SeqTrainer``.

    from nbest_eval.hf import NBestEvalCallback

    nbest = NBestEvalCallback("valid.gold.txt", tokenizer, num_beams=8, max_new_tokens=64)
    args = Seq2SeqTrainingArguments(..., eval_strategy="steps", metric_for_best_model="map",
                                    load_best_model_at_end=True)
    trainer = Seq2SeqTrainer(model, args, ..., callbacks=[EarlyStoppingCallback(3), nbest])

At every evaluation each process translates its share of the gold prompts with beam search,
keeps ``num_return_sequences`` hypotheses per prompt (model score: ``sequences_scores``, the
length-normalized natural-log probability), scores them with :class:`~nbest_eval.scorer.Scorer`,
and all-reduces the additive statistics, so every process sees the same ``eval_map``,
``eval_bleu_100x100``, ``eval_wf1``, ... .

Where the values go. The Trainer logs an evaluation's metrics *before* it calls ``on_evaluate``,
and calls callbacks in list order, so metrics added in ``on_evaluate`` would miss the logs and any
callback listed earlier (``EarlyStoppingCallback``). This callback therefore computes its metrics
inside the Trainer's ``evaluation_loop``, before any of that: they land in the metrics dict that
the Trainer logs (``state.log_history``, each checkpoint's ``trainer_state.json``, the console,
TensorBoard and other reporters), hands to every callback's ``on_evaluate`` whatever its position,
and uses for ``metric_for_best_model``. To get there it needs its Trainer, which the Trainer does
not pass to callbacks: the callback finds it on the call stack the first time the Trainer calls it
(``on_init_end`` for callbacks given to the constructor, ``on_train_begin`` for ``add_callback``),
or you call :meth:`NBestEvalCallback.attach`, or you use :class:`NBestSeq2SeqTrainer` /
:class:`NBestTrainer` (``nbest_eval=callback``), which override ``evaluation_loop`` instead of
wrapping it on the instance. When none of that works, training stops at ``on_train_begin`` with a
message saying what to do.

Outside training, :class:`NBestEvaluator` scores any model (``evaluate(model)``) and
:func:`score_checkpoint` a saved checkpoint directory.

This module imports torch and transformers; nothing else in :mod:`nbest_eval` imports it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union


def _import_torch_stack():
    """Import torch and transformers' Trainer, working around a torchaudio that cannot load.

    transformers imports torchaudio whenever it is installed (``audio_utils``); a torchaudio built for
    another torch (e.g. pulled in by fairseq) then breaks ``import transformers.Trainer`` with an
    ``OSError``. Only in that case is torchaudio hidden from transformers (nothing here needs audio).
    """
    if "torchaudio" not in sys.modules and "transformers.trainer" not in sys.modules:
        try:
            import torchaudio  # noqa: F401
        except ImportError:
            pass
        except Exception as err:  # OSError: undefined symbol / missing libc10_cuda.so, ...
            sys.modules["torchaudio"] = None  # type: ignore[assignment]  # find_spec() -> None
            import_utils = sys.modules.get("transformers.utils.import_utils")
            cached = getattr(import_utils, "is_torchaudio_available", None)
            if hasattr(cached, "cache_clear"):  # `import transformers` may have asked already
                cached.cache_clear()
            logging.getLogger(__name__).warning(
                "torchaudio is installed but cannot be loaded (%s); hiding it from transformers. "
                "Install the torchaudio build that matches torch to silence this.", str(err).splitlines()[0])


_import_torch_stack()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from transformers import Seq2SeqTrainer, Trainer, TrainerCallback  # noqa: E402

from .data import Gold, GoldPrompt, Hyp, InputError, NBest, prompt_id  # noqa: E402
from .formats import read_gold, write_gold, write_nbest  # noqa: E402
from .formats.common import unused_stem  # noqa: E402
from .metrics import is_metric_key  # noqa: E402
from .metrics.base import N_PROMPTS  # noqa: E402
from .scorer import DEFAULT_METRICS, Scorer, parse_metric_list  # noqa: E402
from .stats import Stats  # noqa: E402

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
#: formats the callback can save n-best lists in; all of them are read back by ``nbest-eval score``
SAVE_FORMATS = ("jsonl", "tsv", "staple")


# ---------------------------------------------------------------------------------------------
# distributed helpers: every rank calls them, in the same order


def _world() -> Tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _reduce_device(fallback: "torch.device") -> "torch.device":
    """Where a tensor must live for the default group's backend: CPU for gloo, else the model's."""
    backend = str(dist.get_backend()).lower()
    if "gloo" in backend or "mpi" in backend:
        return torch.device("cpu")
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return fallback


def _all_reduce(values: Sequence[float], op: str, device: "torch.device") -> List[float]:
    """Sum (``op="sum"``) or max of a float vector over all ranks, in float64; local when not distributed."""
    if _world()[1] == 1:
        return [float(v) for v in values]
    tensor = torch.tensor(list(values), dtype=torch.float64, device=_reduce_device(device))
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.cpu().tolist()


def _gather_to_rank0(obj: Any) -> Optional[List[Any]]:
    """Every rank's ``obj`` on rank 0 (in rank order), None on the other ranks."""
    rank, world = _world()
    if world == 1:
        return [obj]
    out: List[Any] = [None] * world
    dist.all_gather_object(out, obj)  # works on gloo and nccl alike; the lists are small
    return out if rank == 0 else None


# ---------------------------------------------------------------------------------------------
# the evaluator: generation + scoring, no Trainer needed


@dataclasses.dataclass
class NBestResult:
    """One evaluation: metric values and summed statistics (identical on every rank), timings.

    ``generate_seconds`` / ``score_seconds`` are the slowest rank's. ``nbest`` holds every prompt's
    list, in prompt order, when the evaluation was asked to gather them (on rank 0 only).
    """

    values: Dict[str, Optional[float]]
    stats: Stats
    generate_seconds: float
    score_seconds: float
    n_prompts: int
    nbest: Optional[NBest] = None

    def metrics(self, prefix: str = "eval", name: Optional[str] = None) -> Dict[str, float]:
        """Trainer-style metrics: ``{prefix}_{key}`` (``{prefix}_{name}_{key}`` with ``name``).

        An undefined value (None, e.g. a preference correlation with no prompt counted) is given as
        0.0, as the fairseq task logs it: every key is present at every evaluation, so
        ``metric_for_best_model`` always finds its value (``values`` keeps the None).
        Timings go under ``{prefix}_{name or 'nbest'}_generate_seconds`` / ``..._score_seconds``.
        """
        head = f"{prefix}_{name}_" if name else f"{prefix}_"
        out = {head + key: 0.0 if value is None else float(value) for key, value in self.values.items()}
        side = f"{prefix}_{name or 'nbest'}_"
        out[side + "generate_seconds"] = round(self.generate_seconds, 4)
        out[side + "score_seconds"] = round(self.score_seconds, 4)
        out[side + "prompts"] = float(self.n_prompts)
        return out


def _resolve_prompts(gold: Gold, prompts: Any) -> List[GoldPrompt]:
    """The gold prompts to translate: all of them (None), or those named by text (a list, or a file
    with one prompt a line), matched on the exact text, else on the STAPLE id of the text."""
    if prompts is None:
        return list(gold)
    source = None
    if isinstance(prompts, (str, os.PathLike)):
        source = os.fspath(prompts)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"cannot read the prompts file: {getattr(err, 'strerror', None) or err}", source) from None
        prompts = [line.removesuffix("\r") for line in text.split("\n")]
        if prompts and prompts[-1] == "":
            prompts.pop()
    by_text = {p.text: p for p in gold}
    resolved, missing, seen = [], [], set()
    for text in prompts:
        if not isinstance(text, str):
            raise InputError(f"prompts must be strings (source texts), got {type(text).__name__}", source)
        prompt = by_text.get(text)
        if prompt is None:
            pid = prompt_id(text)
            prompt = gold[pid] if pid in gold else None
        if prompt is None:
            missing.append(text)
            continue
        if prompt.id in seen:
            raise InputError(f"prompt {text!r} is listed twice (it would be counted twice)", source)
        seen.add(prompt.id)
        resolved.append(prompt)
    if missing:
        where = f" {gold.path}" if gold.path else ""
        examples = ", ".join(repr(m) for m in missing[:3])
        raise InputError(f"{len(missing)} of {len(missing) + len(resolved)} prompts are not in the gold{where} "
                         f"(matched on the text or on prompt_ + md5 of its lowercased text), e.g. {examples}",
                         source)
    if not resolved:
        raise InputError("no prompt to evaluate", source)
    return resolved


class NBestEvaluator:
    """Translates prompts into beam n-best lists and scores them against a STAPLE gold.

    Args:
        gold: a STAPLE gold file or a parsed :class:`~nbest_eval.data.Gold`.
        tokenizer: the model's tokenizer (``__call__``, ``batch_decode``, ``pad_token_id``); may be
            set later (the callback takes the Trainer's ``processing_class``).
        prompts: the source texts to translate: None (every gold prompt, in gold order), a list of
            texts, or a file with one text a line (e.g. ``valid.src``); each must be a gold prompt.
        num_beams / num_return_sequences: beam size and n-best length (default: ``num_beams``).
        max_new_tokens, length_penalty: passed to ``generate``; ``generation_kwargs`` adds or
            overrides any other ``generate`` argument (``output_scores`` and
            ``return_dict_in_generate`` are always on: they give ``sequences_scores``).
        metrics: metric keys (list or ``"map,wf1"``) or a ready :class:`~nbest_eval.scorer.Scorer`;
            ``scorer_options`` are the Scorer's keyword arguments (``bleu_tokenize``, ``wf1_top``...).
        batch_size: prompts per ``generate`` call (each gives ``num_return_sequences`` outputs).
            Prompts are sorted by length into batches, and the batches dealt to ranks, so a prompt's
            batch, hence its n-best list, does not depend on the number of processes.
        subset_size / subset_seed: score a fixed random subset of the prompts (the same at every
            evaluation, kept in prompt order) for cheaper validation.
        max_source_length: truncate sources to this many tokens (default: no truncation).
        max_len_a / max_len_b: fairseq-style length limit: each batch generates at most
            ``max_len_a * (its longest source) + max_len_b`` new tokens (overrides max_new_tokens).
        preprocess: applied to each prompt text before tokenization (e.g. a T5 task prefix).
        postprocess: applied to each decoded hypothesis (detokenization); default ``str.strip``.
        decode_kwargs: for ``tokenizer.batch_decode`` (default ``skip_special_tokens=True``).

    Greedy search (``num_beams=1``) gives no ``sequences_scores``: hypotheses then have no score.
    Models whose parameters are sharded across ranks (FSDP, DeepSpeed ZeRO-3) are not supported:
    ranks generate different numbers of batches, which sharded forward passes cannot do.
    """

    def __init__(self, gold: Union[PathLike, Gold], tokenizer: Any = None, prompts: Any = None, *,
                 num_beams: int = 8, num_return_sequences: Optional[int] = None,
                 max_new_tokens: Optional[int] = 64, length_penalty: float = 1.0,
                 generation_kwargs: Optional[Mapping[str, Any]] = None,
                 metrics: Union[str, Sequence[str], Scorer] = DEFAULT_METRICS,
                 scorer_options: Optional[Mapping[str, Any]] = None, batch_size: int = 32,
                 subset_size: Optional[int] = None, subset_seed: int = 0,
                 max_source_length: Optional[int] = None, max_len_a: Optional[float] = None,
                 max_len_b: Optional[int] = None,
                 preprocess: Optional[Callable[[str], str]] = None,
                 postprocess: Optional[Callable[[str], str]] = None,
                 decode_kwargs: Optional[Mapping[str, Any]] = None):
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
        if num_beams < 1:
            raise InputError(f"num_beams must be >= 1, got {num_beams}")
        num_return_sequences = num_beams if num_return_sequences is None else num_return_sequences
        if not 1 <= num_return_sequences <= num_beams:
            raise InputError(f"num_return_sequences must be between 1 and num_beams ({num_beams}), "
                             f"got {num_return_sequences}")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.num_beams, self.num_return_sequences, self.batch_size = num_beams, num_return_sequences, batch_size

        if isinstance(metrics, Scorer):
            if scorer_options:
                raise InputError("give scorer_options or a ready Scorer, not both")
            self.scorer = metrics
        else:
            self.scorer = Scorer(parse_metric_list(metrics) if isinstance(metrics, str) else list(metrics),
                                 **dict(scorer_options or {}))

        prompts_list = _resolve_prompts(self.full_gold, prompts)
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

    def batches(self) -> List[List[int]]:
        """Prompt indices grouped into generate batches: longest sources first, ties in prompt order.

        Batches, not prompts, are dealt to ranks (batch ``b`` to rank ``b % world``), so a prompt is
        always generated with the same neighbours whatever the number of processes.
        """
        encoded = self._encode()
        order = sorted(range(len(encoded)), key=lambda i: (-len(encoded[i]), i))
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def generate(self, model: Any, indices: Optional[Sequence[int]] = None) -> List[List[Hyp]]:
        """The n-best lists of the prompts at ``indices`` (default all) on this process, in that order.

        Batched as :meth:`evaluate` does (:meth:`batches`), so with ``indices=None`` the lists are the
        ones an evaluation scores (batch composition matters when ``max_len_a`` > 0, and for padding);
        a subset keeps each prompt's batch order but drops the prompts not asked for.
        """
        indices = list(range(len(self._encode()))) if indices is None else list(indices)
        wanted = set(indices)
        batches = [[i for i in batch if i in wanted] for batch in self.batches()]
        out = dict(zip((i for batch in batches for i in batch), self._generate_batches(model, batches)))
        return [out[i] for i in indices]

    def _generate_batches(self, model: Any, batches: Sequence[Sequence[int]]) -> List[List[Hyp]]:
        """The n-best lists of the prompts of ``batches``, batch after batch, with ``model`` in eval mode."""
        encoded = self._encode()
        hyps: List[List[Hyp]] = []
        was_training = getattr(model, "training", False)
        model.eval()
        try:
            for batch in batches:
                if batch:
                    hyps += self._generate_batch(model, [encoded[i] for i in batch])
        finally:
            if was_training:
                model.train()
        return hyps

    def _generate_batch(self, model: Any, sources: List[List[int]]) -> List[List[Hyp]]:
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
        device = _model_device(model)
        kwargs = dict(self.generate_kwargs)
        if self.max_len is not None:
            kwargs["max_new_tokens"] = max(1, int(self.max_len[0] * width + self.max_len[1]))
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

    # -- evaluation -----------------------------------------------------------------------------

    def evaluate(self, model: Any, *, gather_nbest: bool = False) -> NBestResult:
        """Generate this rank's batches, score them, all-reduce the statistics.

        Under ``torch.distributed`` every rank must call this (with the same prompts and settings);
        each generates the batches dealt to it (possibly none) on ``model``, which should be the
        unwrapped model. ``gather_nbest`` collects every list on rank 0 (``result.nbest``).
        """
        rank, world = _world()
        my_batches = self.batches()[rank::world]
        mine: List[int] = [i for batch in my_batches for i in batch]
        start = time.perf_counter()
        hyps = self._generate_batches(model, my_batches)
        generated = time.perf_counter()
        stats = self.scorer.zero()
        for i, nbest in zip(mine, hyps):
            stats = stats + self.scorer.prompt_stats(self.prompts[i], nbest)
        scored = time.perf_counter()
        device = _model_device(model)
        names = self.scorer.stat_names
        total = Stats.from_vector(names, _all_reduce(stats.to_vector(names), "sum", device))
        gen_s, score_s = _all_reduce([generated - start, scored - generated], "max", device)
        result = NBestResult(self.scorer.values(total), total, gen_s, score_s, int(total[N_PROMPTS]))
        if gather_nbest:
            parts = _gather_to_rank0({self.prompts[i].id: h for i, h in zip(mine, hyps)})
            if parts is not None:
                merged = {k: v for part in parts for k, v in part.items()}
                result.nbest = {p.id: merged[p.id] for p in self.prompts if p.id in merged}
        return result


def _model_device(model: Any) -> "torch.device":
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


def save_nbest(nbest: NBest, directory: PathLike, stem: str, format: str = "jsonl",
               gold: Optional[Gold] = None) -> Path:
    """Write ``nbest`` to ``directory/stem.<format>`` without overwriting anything: when the name is
    taken, ``stem-2``, ``stem-3``, ... (``gold`` is needed for the staple format)."""
    if format not in SAVE_FORMATS:
        raise InputError(f"cannot save n-best lists as {format!r}; choose one of {', '.join(SAVE_FORMATS)}")
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = {"jsonl": ".jsonl", "tsv": ".tsv", "staple": ".txt"}[format]
    path = Path(unused_stem(str(out_dir / stem), (suffix,), "-") + suffix)
    write_nbest(nbest, path, format, gold=gold, overwrite=False)
    return path


# ---------------------------------------------------------------------------------------------
# the Trainer callback


def _find_trainer() -> Optional[Trainer]:
    """The Trainer whose method is on the call stack (callbacks are always called from one)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


_ATTACH_HELP = ("pass the callback to the Trainer constructor (callbacks=[...]), call "
                "callback.attach(trainer), or use nbest_eval.hf.NBestSeq2SeqTrainer(..., nbest_eval=callback)")


class NBestEvalCallback(TrainerCallback):
    """Adds n-best metrics to every Trainer evaluation (see the module docstring for how).

    Args:
        gold, tokenizer, prompts: as for :class:`NBestEvaluator`; ``tokenizer=None`` takes the
            Trainer's ``processing_class``.
        name: metric key infix: ``eval_{name}_map`` instead of ``eval_map`` (to use several callbacks).
        save_dir: when set, rank 0 writes each evaluation's n-best lists there as
            ``nbest-step{global_step}.{jsonl|tsv|txt}`` (``save_format``), never overwriting a file
            (a repeated step gets ``-2``, ...); ``nbest-eval score --gold GOLD --nbest FILE`` reads
            them back. When the prompts are not the whole gold, their gold is written beside them.
        **options: the other arguments of :class:`NBestEvaluator` (``num_beams``, ``metrics``, ...).

    The metrics are ``eval_<key>`` for each metric key, plus ``eval_nbest_generate_seconds``,
    ``eval_nbest_score_seconds`` and ``eval_nbest_prompts``. ``last_result`` keeps the latest
    :class:`NBestResult`, ``saved`` the paths written.
    """

    def __init__(self, gold: Union[PathLike, Gold], tokenizer: Any = None, prompts: Any = None, *,
                 name: Optional[str] = None, save_dir: Optional[PathLike] = None, save_format: str = "jsonl",
                 **options: Any):
        if save_format not in SAVE_FORMATS:
            raise InputError(f"cannot save n-best lists as {save_format!r}; choose one of {', '.join(SAVE_FORMATS)}")
        self.evaluator = NBestEvaluator(gold, tokenizer, prompts, **options)
        self.name = name
        self.save_dir = None if save_dir is None else Path(save_dir)
        self.save_format = save_format
        self.last_result: Optional[NBestResult] = None
        self.saved: List[Path] = []
        self._trainer: Optional[weakref.ReferenceType] = None
        self._done_in_loop = False
        self._gold_saved = False

    # -- wiring ---------------------------------------------------------------------------------

    @property
    def trainer(self) -> Optional[Trainer]:
        return None if self._trainer is None else self._trainer()

    def attach(self, trainer: Trainer) -> "NBestEvalCallback":
        """Hook into ``trainer``'s evaluation loop (and register as its callback if needed)."""
        current = self.trainer
        if current is trainer:
            return self
        if current is not None:
            raise RuntimeError("this NBestEvalCallback is already attached to another Trainer; make one per Trainer")
        self._trainer = weakref.ref(trainer)
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        if isinstance(trainer, NBestEvalMixin):
            if self not in trainer.nbest_callbacks:
                trainer.nbest_callbacks.append(self)
        else:
            for method in ("evaluation_loop", "prediction_loop"):  # prediction_loop: 4.x legacy loop
                if hasattr(trainer, method):
                    setattr(trainer, method, _LoopHook(self, getattr(trainer, method)))
        if self.evaluator.tokenizer is None:
            tokenizer = getattr(trainer, "processing_class", None) or getattr(trainer, "tokenizer", None)
            if tokenizer is not None and hasattr(tokenizer, "batch_decode"):
                self.evaluator.tokenizer = tokenizer
        return self

    def _attach_from_stack(self) -> bool:
        if self.trainer is None:
            trainer = _find_trainer()
            if trainer is not None:
                self.attach(trainer)
        return self.trainer is not None

    def on_init_end(self, args, state, control, **kwargs):
        self._attach_from_stack()

    def on_train_begin(self, args, state, control, **kwargs):
        if not self._attach_from_stack():
            raise RuntimeError("NBestEvalCallback could not find the Trainer that runs it, so its metrics "
                               "would miss the logs and earlier callbacks; " + _ATTACH_HELP)
        self.check_setup(args)

    def check_setup(self, args: Any) -> None:
        """Fail before training when the setup cannot work (raises ValueError / RuntimeError)."""
        trainer = self.trainer
        if self.evaluator.tokenizer is None:
            raise ValueError("NBestEvalCallback has no tokenizer: pass tokenizer= to it or "
                             "processing_class= to the Trainer")
        if trainer is not None:
            sharded = getattr(trainer, "is_fsdp_enabled", False)
            plugin = getattr(getattr(getattr(trainer, "accelerator", None), "state", None), "deepspeed_plugin", None)
            sharded = sharded or getattr(plugin, "zero_stage", 0) == 3
            if sharded:
                raise RuntimeError("NBestEvalCallback does not support sharded parameters (FSDP, DeepSpeed "
                                   "ZeRO-3): ranks generate different numbers of batches")
        metric = getattr(args, "metric_for_best_model", None)
        if metric:
            key = metric[len("eval_"):] if metric.startswith("eval_") else metric
            if self.name:
                if not key.startswith(self.name + "_"):
                    return
                key = key[len(self.name) + 1:]
            if key in self.evaluator.scorer.keys:
                if getattr(args, "greater_is_better", True) is False:
                    logger.warning("metric_for_best_model=%r is higher-is-better but greater_is_better=False", metric)
                return
            if not is_metric_key(key):
                return  # not an n-best metric (eval_loss, a compute_metrics key...)
            raise ValueError(f"metric_for_best_model={metric!r} is an n-best metric that this NBestEvalCallback "
                             f"does not compute (it computes {', '.join(self.evaluator.scorer.keys)}); add "
                             f"{key!r} to its metrics")

    # -- evaluation -----------------------------------------------------------------------------

    def run(self, trainer: Trainer, prefix: str = "eval") -> Dict[str, float]:
        """Evaluate ``trainer``'s model now (every rank) and return the Trainer-style metrics."""
        model = trainer.model
        accelerator = getattr(trainer, "accelerator", None)
        if accelerator is not None:
            model = accelerator.unwrap_model(model)
        result = self.evaluator.evaluate(model, gather_nbest=self.save_dir is not None)
        self.last_result = result
        if self.save_dir is not None and result.nbest is not None:
            self._save(result, trainer.state.global_step)
        metrics = result.metrics(prefix, self.name)
        logger.info("n-best evaluation at step %d: %s", trainer.state.global_step,
                    ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
        return metrics

    def _save(self, result: NBestResult, step: int) -> None:
        stem = f"nbest-step{step}" if not self.name else f"{self.name}-nbest-step{step}"
        gold = self.evaluator.gold
        path = save_nbest(result.nbest, self.save_dir, stem, self.save_format, gold)
        self.saved.append(path)
        if not self._gold_saved and len(gold) != len(self.evaluator.full_gold):
            gold_path = self.save_dir / (f"{self.name}-gold.txt" if self.name else "gold.txt")
            if not gold_path.exists():
                write_gold(gold, gold_path)
            self._gold_saved = True
        logger.info("n-best lists of step %d written to %s", step, path)

    def _in_loop(self, trainer: Trainer, output: Any, description: str, prefix: str) -> Any:
        """Called right after the Trainer's evaluation loop, before it logs ``output.metrics``."""
        if description != "Evaluation":  # predict() passes "Prediction"
            return output
        output.metrics.update(self.run(trainer, prefix))
        self._done_in_loop = True
        return output

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self._done_in_loop:
            self._done_in_loop = False
            return
        # Not hooked for this evaluation (an evaluate() before training by a callback added with
        # add_callback): add the metrics now for the caller and the log history, and hook in for
        # the next evaluations. Callbacks listed earlier and reporters have missed them this time.
        if not self._attach_from_stack() or metrics is None:
            return
        prefix = _prefix_of(metrics)
        extra = self.run(self.trainer, prefix)
        metrics.update(extra)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra)
        logger.warning("NBestEvalCallback was not hooked into this evaluation; its metrics missed the "
                       "reporters and earlier callbacks this once. " + _ATTACH_HELP)


def _prefix_of(metrics: Mapping[str, Any]) -> str:
    for key in metrics:
        if key.endswith("_runtime"):
            return key[: -len("_runtime")]
    return "eval"


class _LoopHook:
    """``trainer.evaluation_loop`` wrapped on the instance: the original loop, then the callback."""

    def __init__(self, callback: NBestEvalCallback, loop: Callable):
        self.callback, self.__wrapped__ = callback, loop

    def __call__(self, dataloader, description, *args, **kwargs):
        output = self.__wrapped__(dataloader, description, *args, **kwargs)
        prefix = kwargs.get("metric_key_prefix", args[2] if len(args) > 2 else "eval")
        trainer = self.callback.trainer
        if trainer is None:
            return output
        return self.callback._in_loop(trainer, output, description, prefix)


class NBestEvalMixin:
    """Trainer mixin: n-best metrics computed in ``evaluation_loop``, no wrapping, no stack lookup.

        trainer = NBestSeq2SeqTrainer(model, args, ..., nbest_eval=NBestEvalCallback(gold, tokenizer))

    ``nbest_eval`` is one callback or a list of them (give each a distinct ``name``).
    """

    def __init__(self, *args: Any, nbest_eval: Union[None, NBestEvalCallback, Sequence[NBestEvalCallback]] = None,
                 **kwargs: Any):
        self.nbest_callbacks: List[NBestEvalCallback] = []
        super().__init__(*args, **kwargs)
        callbacks = [] if nbest_eval is None else [nbest_eval] if isinstance(nbest_eval, NBestEvalCallback) \
            else list(nbest_eval)
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


# ---------------------------------------------------------------------------------------------
# saved checkpoints


def default_device() -> "torch.device":
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_checkpoint(path: PathLike, device: Union[None, str, "torch.device"] = None,
                    tokenizer: Optional[PathLike] = None) -> Tuple[Any, Any]:
    """(model, tokenizer) from a ``save_pretrained`` / Trainer checkpoint directory (no network).

    ``tokenizer``: another directory to load the tokenizer from (default: the checkpoint's own).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    path = os.fspath(path)
    if not os.path.isdir(path):
        raise InputError("not a checkpoint directory", path)
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    auto = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
    model = auto.from_pretrained(path, local_files_only=True)
    tokenizer_dir = path if tokenizer is None else os.fspath(tokenizer)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load a tokenizer from it ({str(err).splitlines()[0]}); "
                         f"pass the tokenizer directory", tokenizer_dir) from None
    if device is not None:
        model.to(device)
    model.eval()
    return model, tokenizer


def score_checkpoint(path: PathLike, gold: Union[PathLike, Gold], prompts: Any = None, *,
                     device: Union[None, str, "torch.device"] = None, tokenizer: Optional[PathLike] = None,
                     gather_nbest: bool = False, **options: Any) -> NBestResult:
    """Load a checkpoint directory and score it as the callback does (``options``: NBestEvaluator's).

    ``device`` defaults to the first GPU when there is one, else the CPU.
    """
    model, tok = load_checkpoint(path, device or default_device(), tokenizer)
    evaluator = NBestEvaluator(gold, tok, prompts, **options)
    return evaluator.evaluate(model, gather_nbest=gather_nbest)


def checkpoint_nbest(path: PathLike, gold: Gold, *, beam: int = 10, nbest_size: Optional[int] = None,
                     max_len_a: float = 0.0, max_len_b: int = 200, lenpen: float = 1.0, batch_size: int = 32,
                     tokenizer: Optional[PathLike] = None, prompts: Any = None,
                     device: Union[None, str, "torch.device"] = None, **options: Any) -> NBest:
    """The n-best lists of a checkpoint directory for every gold prompt (``nbest-eval select --hf``).

    fairseq-style options: ``beam``, ``nbest_size`` (default: beam), at most
    ``max_len_a * source length + max_len_b`` new tokens, length penalty ``lenpen``. Batched as the
    callback's evaluations (:meth:`NBestEvaluator.batches`, default ``batch_size`` 32, the callback's),
    so that with the callback's settings the lists are the ones it scored during training.
    """
    model, tok = load_checkpoint(path, device or default_device(), tokenizer)
    evaluator = NBestEvaluator(gold, tok, prompts, num_beams=beam, num_return_sequences=nbest_size or beam,
                               max_new_tokens=None, max_len_a=max_len_a, max_len_b=max_len_b,
                               length_penalty=lenpen, batch_size=batch_size, metrics=["map"], **options)
    hyps = evaluator.generate(model)
    return {prompt.id: nbest for prompt, nbest in zip(evaluator.prompts, hyps)}


__all__ = ["NBestEvaluator", "NBestResult", "NBestEvalCallback", "NBestEvalMixin", "NBestSeq2SeqTrainer",
           "NBestTrainer", "load_checkpoint", "score_checkpoint", "checkpoint_nbest", "save_nbest", "SAVE_FORMATS"]
