"""The Hugging Face demos' building blocks (``scripts.train_hf``, the STAPLE runs, the tests): a
word-level tokenizer built locally, a tiny T5 built from a config, seq2seq datasets of the synthetic corpus, and a
``Seq2SeqTrainer`` wired with :class:`~nbest_eval.hf.NBestEvalCallback`, best-model selection on
``eval_map`` and early stopping. Nothing is downloaded.

    data = ensure_synth("synth")                            # generated when absent
    tokenizer = build_tokenizer(read_lines(data / "train.src") + read_lines(data / "train.tgt"))
    model = build_model(tokenizer, seed=1)
    trainer = make_trainer(DemoConfig(output_dir="run", data=str(data)))
    trainer.train()

A checkpoint saved by the Trainer holds the tokenizer too, so :func:`nbest_eval.hf.score_checkpoint`
reloads and re-scores it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from nbest_eval import hf
from nbest_eval.analysis.synth import GOLD_FILE, generate, write_corpus
from nbest_eval.data import InputError
from nbest_eval.training.devices import check_precision, resolve_device

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0, 1, 2, 3
CORPUS_FILES = ("train.src", "train.tgt", "valid.src", "valid.tgt", GOLD_FILE)


def read_lines(path: os.PathLike | str) -> List[str]:
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def ensure_synth(data_dir: os.PathLike | str, seed: int = 1, train_pairs: int = 20000,
                 valid_prompts: int = 200) -> Path:
    """``data_dir`` holding a synthetic corpus; generated there when it has none (an existing
    corpus is used as is, whatever the other arguments). A partial one is an error.

    Not safe to run in several processes at once: under ``torchrun`` call it inside
    ``training_args.main_process_first(local=False)``, as :func:`make_trainer` does."""
    path = Path(data_dir)
    present = [name for name in CORPUS_FILES if (path / name).is_file()]
    if len(present) == len(CORPUS_FILES):
        return path
    if present:
        missing = sorted(set(CORPUS_FILES) - set(present))
        raise InputError(f"incomplete synthetic corpus: {', '.join(missing)} missing", str(path))
    write_corpus(path, generate(seed, train_pairs, valid_prompts))
    return path


def wrap_tokenizer(core, save_dir: Optional[os.PathLike | str] = None):
    """A ``tokenizers.Tokenizer`` as a ``PreTrainedTokenizerFast`` with <pad> <s> </s> <unk>, saved
    to ``save_dir`` when given (a checkpoint then holds its tokenizer)."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>",
                                        eos_token="</s>", unk_token="<unk>", model_max_length=128,
                                        clean_up_tokenization_spaces=False)
    if save_dir is not None:
        tokenizer.save_pretrained(save_dir)
    return tokenizer


def build_tokenizer(texts: Iterable[str], save_dir: Optional[os.PathLike | str] = None):
    """A word-level ``PreTrainedTokenizerFast`` over the whitespace tokens of ``texts``.

    Ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3, then the words in sorted order (so the
    same texts always give the same ids). Encoding appends ``</s>``; decoding joins words with
    spaces. Source and target share the vocabulary.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    words = sorted({w for text in texts for w in text.split()} - set(SPECIAL_TOKENS))
    vocab = {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + words)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    core.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins tokens with single spaces
    return wrap_tokenizer(core, save_dir)


def tiny_config(tokenizer, d_model: int = 64, layers: int = 2, heads: int = 4, ffn: int = 128,
                dropout: float = 0.0):
    """A small ``T5Config`` for ``tokenizer``'s vocabulary (about 0.2M parameters at the defaults).

    T5 (pre-norm, relative positions) learns the synthetic corpus's reordering at lr 3e-3, where a
    post-norm BART of the same size stays on a plateau much longer.
    """
    from transformers import T5Config

    return T5Config(vocab_size=len(tokenizer), d_model=d_model, d_kv=d_model // heads, d_ff=ffn,
                    num_layers=layers, num_decoder_layers=layers, num_heads=heads,
                    relative_attention_num_buckets=16, relative_attention_max_distance=32,
                    dropout_rate=dropout, feed_forward_proj="relu", tie_word_embeddings=True,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                    bos_token_id=tokenizer.bos_token_id, decoder_start_token_id=tokenizer.pad_token_id)


def build_model(tokenizer, seed: int = 1, **config: Any):
    """A freshly initialized tiny ``T5ForConditionalGeneration`` (``config``: :func:`tiny_config`'s)."""
    from transformers import GenerationConfig, T5ForConditionalGeneration, set_seed

    set_seed(seed)
    model = T5ForConditionalGeneration(tiny_config(tokenizer, **config))
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, decoder_start_token_id=tokenizer.pad_token_id)
    return model


class PairDataset(torch.utils.data.Dataset):
    """Tokenized (source, target) pairs: ``input_ids`` and ``labels`` lists, for DataCollatorForSeq2Seq."""

    def __init__(self, pairs: Sequence[Tuple[str, str]], tokenizer, max_length: int = 62):
        sources = tokenizer([s for s, _ in pairs], truncation=True, max_length=max_length)["input_ids"]
        targets = tokenizer(text_target=[t for _, t in pairs], truncation=True, max_length=max_length)["input_ids"]
        self.items = [{"input_ids": s, "labels": t} for s, t in zip(sources, targets)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Dict[str, List[int]]:
        return self.items[index]


def load_pairs(data_dir: os.PathLike | str, split: str, limit: Optional[int] = None) -> List[Tuple[str, str]]:
    data = Path(data_dir)
    src, tgt = read_lines(data / f"{split}.src"), read_lines(data / f"{split}.tgt")
    if len(src) != len(tgt):
        raise InputError(f"{split}.src has {len(src)} lines but {split}.tgt has {len(tgt)}", str(data))
    pairs = list(zip(src, tgt))
    return pairs[:limit] if limit is not None else pairs


@dataclasses.dataclass
class DemoConfig:
    """Everything :func:`make_trainer` needs; the defaults train a useful model of the synthetic corpus on a CPU."""

    output_dir: str
    data: str = "synth"
    max_steps: int = 3000
    eval_steps: int = 250
    patience: int = 4
    early_stopping_threshold: float = 0.0
    #: None: transformers' EarlyStoppingCallback on eval_map; else an nbest_eval.training.early_stopping rule
    #: (nbest_eval.training.early_stopping.RULES), whose kept checkpoint is the one loaded at the end
    stopping: Optional[str] = None
    stopping_warmup: Optional[int] = None  # None: the rule's default warm-up
    seed: int = 1
    # corpus (used when ``data`` has none)
    synth_seed: int = 1
    train_pairs: int = 20000
    valid_prompts: int = 200
    train_limit: Optional[int] = None   # use only the first N training pairs
    # model and optimization
    #: "t5" (:func:`build_model`) or "transformer", fairseq's architecture and initialization as a
    #: Marian model (:func:`experiments.hf_models.build_fairseq_twin`)
    model: str = "t5"
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    ffn: int = 128
    dropout: float = 0.0
    label_smoothing: float = 0.0
    learning_rate: float = 3e-3
    lr_scheduler: str = "constant_with_warmup"
    warmup_steps: int = 100
    adam_betas: Tuple[float, float] = (0.9, 0.999)
    max_grad_norm: float = 1.0          # gradient clipping (fairseq's --clip-norm)
    batch_size: int = 64
    group_by_length: bool = False       # batches of similar source lengths (fairseq's batching)
    # n-best validation
    num_beams: int = 8
    num_return_sequences: Optional[int] = None
    max_new_tokens: Optional[int] = 24
    #: fairseq's length bound: at most max_len_a * (longest source of the batch) + max_len_b new tokens
    max_len_a: Optional[float] = None
    max_len_b: Optional[int] = None
    #: prompts a generate call; None: the evaluator's default for the device the model is on (32 on
    #: a CPU, a token budget that fills a GPU)
    eval_batch_size: Optional[int] = None
    #: more ``generate`` arguments, e.g. ``{"early_stopping": True}``: a prompt is done once it has
    #: num_beams finished hypotheses, as in fairseq's beam search
    generation_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    eval_prompts: Optional[int] = None  # subset size; None: every valid prompt
    metrics: Sequence[str] = ("map", "rr", "ndcg10", "ap_t", "wf1", "pref_spearman", "bleu_1x1", "bleu_100x100")
    save_nbest: bool = True             # write each evaluation's n-best lists to OUTPUT_DIR/nbest
    save_format: str = "jsonl"          # ... as jsonl or tsv
    #: "loop", "async" (a sidecar evaluates snapshots off the training clock) or "off" (no n-best
    #: validation, the best model by loss: the baseline for the other two's wall time)
    nbest_mode: str = "loop"
    async_device: Optional[str] = None  # the sidecar's device (default: the training device kind), or "external"
    #: where training runs: "auto" (cuda when torch sees a GPU), "cpu" or "cuda"; and in what precision,
    #: "fp32", "bf16" or "fp16" (TrainingArguments' bf16/fp16, which the n-best callback generates in too)
    device: str = "auto"
    precision: str = "fp32"
    report_to: Sequence[str] = ()       # e.g. ("tensorboard",) when installed
    save_total_limit: Optional[int] = None
    disable_tqdm: bool = True           # print the logs (PrinterCallback) instead of progress bars


def make_callback(config: DemoConfig, tokenizer, data: Path) -> hf.NBestEvalCallback:
    return hf.NBestEvalCallback(
        data / GOLD_FILE, tokenizer, data / "valid.src", num_beams=config.num_beams,
        num_return_sequences=config.num_return_sequences, max_new_tokens=config.max_new_tokens,
        max_len_a=config.max_len_a, max_len_b=config.max_len_b, generation_kwargs=config.generation_kwargs,
        metrics=list(config.metrics), batch_size=config.eval_batch_size, subset_size=config.eval_prompts,
        save_dir=Path(config.output_dir) / "nbest" if config.save_nbest else None, save_format=config.save_format,
        mode=config.nbest_mode, async_device=config.async_device)


def training_arguments(config: DemoConfig, **overrides: Any):
    from transformers import Seq2SeqTrainingArguments

    kwargs: Dict[str, Any] = dict(
        output_dir=config.output_dir, max_steps=config.max_steps, eval_strategy="steps",
        eval_steps=config.eval_steps, save_strategy="steps", save_steps=config.eval_steps,
        logging_steps=config.eval_steps,
        **best_model(config),
        load_best_model_at_end=True, save_total_limit=config.save_total_limit, learning_rate=config.learning_rate,
        warmup_steps=config.warmup_steps, lr_scheduler_type=config.lr_scheduler, adam_beta1=config.adam_betas[0],
        adam_beta2=config.adam_betas[1], max_grad_norm=config.max_grad_norm,
        label_smoothing_factor=config.label_smoothing, **group_by_length(config.group_by_length),
        per_device_train_batch_size=config.batch_size, per_device_eval_batch_size=config.batch_size,
        seed=config.seed, data_seed=config.seed, report_to=list(config.report_to) or "none",
        dataloader_num_workers=0, disable_tqdm=config.disable_tqdm, **device_arguments(config))
    kwargs.update(overrides)
    return Seq2SeqTrainingArguments(**kwargs)


def device_arguments(config: DemoConfig) -> Dict[str, Any]:
    """TrainingArguments' ``use_cpu``, ``bf16`` and ``fp16`` for ``config.device`` and ``config.precision``
    (a precision the Trainer cannot train in there is an InputError)."""
    device = resolve_device(config.device)
    check_precision("hf", device, config.precision)
    return {"use_cpu": device == "cpu", "bf16": config.precision == "bf16", "fp16": config.precision == "fp16"}


def best_model(config: DemoConfig) -> Dict[str, Any]:
    """What ``load_best_model_at_end`` loads: the kept step of an n-best rule, else the best MAP in the
    loop, the lowest loss where no MAP comes with the evaluation (off; async, whose MAP comes later)."""
    if config.stopping is not None:
        return {"metric_for_best_model": hf.early_stopping.KEPT_STEP, "greater_is_better": True}
    if config.nbest_mode == "loop":
        return {"metric_for_best_model": "map", "greater_is_better": True}
    return {"metric_for_best_model": "loss", "greater_is_better": False}


def group_by_length(on: bool) -> Dict[str, Any]:
    """The training arguments for batches of similar lengths: ``train_sampling_strategy`` (transformers
    5) or ``group_by_length`` (4.x)."""
    from transformers import TrainingArguments

    if "train_sampling_strategy" in TrainingArguments.__dataclass_fields__:
        return {"train_sampling_strategy": "group_by_length" if on else "random"}
    return {"group_by_length": on}


def build(config: DemoConfig, tokenizer):
    """``config.model`` freshly initialized for ``tokenizer``."""
    sizes = dict(d_model=config.d_model, layers=config.layers, heads=config.heads, ffn=config.ffn,
                 dropout=config.dropout)
    if config.model == "t5":
        return build_model(tokenizer, config.seed, **sizes)
    if config.model == "transformer":
        from .hf_models import build_fairseq_twin

        return build_fairseq_twin(tokenizer, config.seed, **sizes)
    raise InputError(f"DemoConfig.model must be 't5' or 'transformer', got {config.model!r}")


def tokenizer_argument(trainer_class, tokenizer) -> Dict[str, Any]:
    """``processing_class=`` (transformers >= 4.46) or ``tokenizer=`` (older 4.x)."""
    import inspect

    name = "processing_class" if "processing_class" in inspect.signature(trainer_class.__init__).parameters \
        else "tokenizer"
    return {name: tokenizer}


def make_trainer(config: DemoConfig, *, tokenizer=None, nbest_first: bool = False,
                 extra_callbacks: Sequence[Any] = (), **argument_overrides: Any):
    """A ``Seq2SeqTrainer`` on the synthetic corpus (or any corpus laid out like it in ``config.data``)
    with the n-best callback and early stopping.

    ``tokenizer``: a prebuilt one (e.g. a SentencePiece model's); default: a word-level tokenizer
    over the corpus (:func:`build_tokenizer`).
    The callbacks are ``[EarlyStoppingCallback, NBestEvalCallback]`` (reversed with ``nbest_first``;
    the order does not matter; ``NBestEarlyStoppingCallback`` with ``config.stopping``; no early stopping
    in async mode without ``config.stopping``, and neither with ``nbest_mode="off"``) plus
    ``extra_callbacks``; ``trainer.nbest`` is the n-best callback (None when off).
    ``argument_overrides`` go to ``Seq2SeqTrainingArguments``.
    """
    from transformers import DataCollatorForSeq2Seq, EarlyStoppingCallback, Seq2SeqTrainer

    args = training_arguments(config, **argument_overrides)
    # one process generates a missing corpus, the others wait for it (torchrun: every rank runs this)
    with args.main_process_first(local=False, desc="synthetic corpus"):
        data = ensure_synth(config.data, config.synth_seed, config.train_pairs, config.valid_prompts)
    train = load_pairs(data, "train", config.train_limit)
    valid = load_pairs(data, "valid")
    if tokenizer is None:
        tokenizer = build_tokenizer([s for pair in train + valid for s in pair])
    model = build(config, tokenizer)
    if config.nbest_mode not in ("loop", "async", "off"):
        raise InputError(f"DemoConfig.nbest_mode must be 'loop', 'async' or 'off', got {config.nbest_mode!r}")
    nbest = None if config.nbest_mode == "off" else make_callback(config, tokenizer, data)
    if config.stopping is not None:
        stopping = hf.NBestEarlyStoppingCallback("map", config.patience, config.stopping, warmup=config.stopping_warmup)
    elif config.nbest_mode == "loop":
        stopping = EarlyStoppingCallback(config.patience, config.early_stopping_threshold)
    else:  # transformers' rule needs the measure with the evaluation
        stopping = None
    callbacks = [c for c in (stopping, nbest) if c is not None]
    callbacks = (callbacks[::-1] if nbest_first else callbacks) + list(extra_callbacks)
    trainer = Seq2SeqTrainer(
        model=model, args=args,
        train_dataset=PairDataset(train, tokenizer), eval_dataset=PairDataset(valid, tokenizer),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model), callbacks=callbacks,
        **tokenizer_argument(Seq2SeqTrainer, tokenizer))
    trainer.nbest = nbest
    return trainer
