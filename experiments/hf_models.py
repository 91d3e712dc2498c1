"""Other model kinds with the Hugging Face adapter: a subword tokenizer trained locally, a
Marian- or BART-style encoder-decoder built from a config, and a decoder-only causal LM (Llama- or
GPT-2-style) that translates from a prompt template. Nothing is downloaded.

    texts = [s for pair in train for s in pair]
    tokenizer = train_subword_tokenizer(texts)                      # "$A </s>": for encoder-decoders
    model = build_seq2seq(tokenizer, "marian")                      # or "bart"
    # ... Seq2SeqTrainer + PairDataset + DataCollatorForSeq2Seq + NBestEvalCallback, as hf_toy

    lm_tokenizer = train_subword_tokenizer(texts + [TEMPLATE], template="causal")   # "<s> $A"
    lm = build_causal_lm(lm_tokenizer, "llama")                     # or "gpt2"
    train_set = PromptDataset(train, lm_tokenizer)                  # labels only on target + </s>
    trainer = Trainer(lm, args, train_dataset=train_set, data_collator=CausalCollator(lm_tokenizer),
                      processing_class=lm_tokenizer,
                      callbacks=[NBestEvalCallback(gold, prompts=..., preprocess=format_prompt)])

The evaluator pads decoder-only inputs on the left and decodes only the generated continuation; its
``preprocess`` must build the same prompt the LM was trained on (:func:`format_prompt`).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Sequence, Tuple

import torch

from .hf_toy import wrap_tokenizer

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0, 1, 2, 3
#: the prompt of the decoder-only LM; the target follows it after a space
TEMPLATE = "translate: {source} =>"


def format_prompt(source: str) -> str:
    """The decoder-only LM's input for ``source`` (give it as the evaluator's ``preprocess``)."""
    return TEMPLATE.format(source=source)


def train_subword_tokenizer(texts: Iterable[str], vocab_size: int = 160, kind: str = "bpe",
                            template: str = "seq2seq", save_dir: Any = None):
    """A SentencePiece-like subword ``PreTrainedTokenizerFast`` trained on ``texts`` with ``tokenizers``.

    ``kind``: ``"bpe"`` or ``"unigram"``; words are split on whitespace and marked with ``▁``
    (Metaspace), so decoding restores the text exactly. Ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2,
    ``<unk>`` 3. ``template``: ``"seq2seq"`` appends ``</s>`` to every encoding (encoder inputs and
    targets), ``"causal"`` prepends ``<s>`` and adds no ``</s>`` (a prompt must not end a sequence).
    A small ``vocab_size`` keeps many words split into several pieces.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    texts = list(texts)
    special = list(SPECIAL_TOKENS)
    if kind == "bpe":
        core = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    elif kind == "unigram":
        core = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=special, unk_token="<unk>",
                                          show_progress=False)
    else:
        raise ValueError(f"kind must be 'bpe' or 'unigram', got {kind!r}")
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.train_from_iterator(texts, trainer)
    if template == "seq2seq":
        core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    elif template == "causal":
        core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    else:
        raise ValueError(f"template must be 'seq2seq' or 'causal', got {template!r}")
    return wrap_tokenizer(core, save_dir)


def _generation_config(tokenizer, **extra: Any):
    from transformers import GenerationConfig

    return GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id, **extra)


def build_seq2seq(tokenizer, family: str = "marian", seed: int = 1, d_model: int = 64, layers: int = 2,
                  heads: int = 4, ffn: int = 128, dropout: float = 0.0, **config: Any):
    """A freshly initialized tiny ``MarianMTModel`` (``family="marian"``, decoder starts with
    ``<pad>``) or ``BartForConditionalGeneration`` (``"bart"``, decoder starts with ``</s>``);
    ``config``: more config fields (e.g. ``activation_function``, ``scale_embedding``)."""
    from transformers import BartConfig, BartForConditionalGeneration, MarianConfig, MarianMTModel, set_seed

    common = dict(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                  encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                  decoder_ffn_dim=ffn, max_position_embeddings=128, dropout=dropout, attention_dropout=0.0,
                  activation_dropout=0.0, pad_token_id=tokenizer.pad_token_id,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                  tie_word_embeddings=True, **config)
    set_seed(seed)
    if family == "marian":
        start = tokenizer.pad_token_id
        model = MarianMTModel(MarianConfig(decoder_start_token_id=start, forced_eos_token_id=None,
                                           decoder_vocab_size=len(tokenizer), share_encoder_decoder_embeddings=True,
                                           **common))
    elif family == "bart":
        start = tokenizer.eos_token_id
        model = BartForConditionalGeneration(BartConfig(decoder_start_token_id=start, forced_eos_token_id=None,
                                                        forced_bos_token_id=None, **common))
    else:
        raise ValueError(f"family must be 'marian' or 'bart', got {family!r}")
    model.generation_config = _generation_config(tokenizer, decoder_start_token_id=start)
    return model


def build_fairseq_twin(tokenizer, seed: int = 1, d_model: int = 128, layers: int = 3, heads: int = 4,
                       ffn: int = 256, dropout: float = 0.2):
    """fairseq's ``transformer`` architecture as a ``MarianMTModel``: post-norm, sinusoidal positions,
    embeddings scaled by sqrt(d_model) and shared by encoder, decoder and output, ReLU, dropout on
    the residual paths only, and fairseq's initialization (:func:`fairseq_init`). The defaults are
    the dimensions of ``configs/staple_transformer.args``."""
    model = build_seq2seq(tokenizer, "marian", seed, d_model, layers, heads, ffn, dropout,
                          activation_function="relu", scale_embedding=True)
    return fairseq_init(model, seed)


def fairseq_init(model, seed: int = 1):
    """fairseq 0.12's initialization of a transformer, in place: token embeddings N(0, d_model^-0.5)
    with a zero padding row (scaled by sqrt(d_model) they are of unit size, like the sinusoidal
    positions); attention projections Xavier-uniform (query, key and value with gain 1/sqrt(2)), the
    output projection's bias zero; the feed-forward layers and the query, key and value biases left
    at PyTorch's default (uniform in +-1/sqrt(fan_in)), as fairseq leaves them.

    transformers' default, N(0, 0.02) everywhere, leaves the scaled token embeddings a third of the
    positions' size and the sublayers a third of Xavier's, and the same model learns the STAPLE
    pairs far slower; Xavier-uniform feed-forward layers with zero biases, slower too
    (docs/experiments/hf-recipe.md)."""
    torch.manual_seed(seed)
    embeddings = model.get_input_embeddings()
    torch.nn.init.normal_(embeddings.weight, 0.0, embeddings.embedding_dim ** -0.5)
    with torch.no_grad():
        embeddings.weight[embeddings.padding_idx].zero_()
    output = model.get_output_embeddings()
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or module is output:
            continue
        role = name.rsplit(".", 1)[-1]
        module.reset_parameters()  # PyTorch's default, which fairseq keeps for what it does not set below
        if role in ("q_proj", "k_proj", "v_proj"):
            torch.nn.init.xavier_uniform_(module.weight, gain=2 ** -0.5)
        elif role == "out_proj":
            torch.nn.init.xavier_uniform_(module.weight)
            torch.nn.init.zeros_(module.bias)
    return model


def build_causal_lm(tokenizer, family: str = "llama", seed: int = 1, d_model: int = 64, layers: int = 2,
                    heads: int = 4, ffn: int = 128):
    """A freshly initialized tiny ``LlamaForCausalLM`` (``"llama"``: RoPE, pre-norm) or
    ``GPT2LMHeadModel`` (``"gpt2"``: learned positions). ``generate`` derives position ids from
    the attention mask, so left-padded prompts get the positions they have alone."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, set_seed

    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
               eos_token_id=tokenizer.eos_token_id)
    set_seed(seed)
    if family == "llama":
        model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=d_model, intermediate_size=ffn,
                                             num_hidden_layers=layers, num_attention_heads=heads,
                                             num_key_value_heads=heads, max_position_embeddings=128,
                                             tie_word_embeddings=True, **ids))
    elif family == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=d_model, n_layer=layers, n_head=heads,
                                           n_inner=ffn, n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0, **ids))
    else:
        raise ValueError(f"family must be 'llama' or 'gpt2', got {family!r}")
    model.generation_config = _generation_config(tokenizer)
    return model


def encode_example(source: str, target: str, tokenizer, max_length: int = 96) -> Dict[str, List[int]]:
    """One decoder-only training sequence: ``<s> prompt`` then ``target </s>``, labels -100 on the prompt.

    Prompt and target are encoded separately and concatenated, so the prompt's ids are exactly what
    the evaluator feeds ``generate`` (``tokenizer(format_prompt(source))``) and the target's first
    word keeps its word-start piece.
    """
    prompt = tokenizer(format_prompt(source))["input_ids"]
    answer = tokenizer(target, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    input_ids = (prompt + answer)[:max_length]
    labels = ([-100] * len(prompt) + answer)[:max_length]
    return {"input_ids": input_ids, "labels": labels}


class PromptDataset(torch.utils.data.Dataset):
    """(source, target) pairs as decoder-only training sequences (:func:`encode_example`)."""

    def __init__(self, pairs: Sequence[Tuple[str, str]], tokenizer, max_length: int = 96):
        self.items = [encode_example(s, t, tokenizer, max_length) for s, t in pairs]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Dict[str, List[int]]:
        return self.items[index]


class CausalCollator:
    """Pads ``input_ids`` (with ``<pad>``, right: training needs no left padding) and ``labels``
    (with -100), and adds the ``attention_mask``."""

    def __init__(self, tokenizer):
        self.pad = tokenizer.pad_token_id

    def __call__(self, items: Sequence[Dict[str, List[int]]]) -> Dict[str, torch.Tensor]:
        width = max(len(item["input_ids"]) for item in items)
        batch = {"input_ids": torch.full((len(items), width), self.pad, dtype=torch.long),
                 "attention_mask": torch.zeros((len(items), width), dtype=torch.long),
                 "labels": torch.full((len(items), width), -100, dtype=torch.long)}
        for row, item in enumerate(items):
            n = len(item["input_ids"])
            batch["input_ids"][row, :n] = torch.tensor(item["input_ids"])
            batch["attention_mask"][row, :n] = 1
            batch["labels"][row, :n] = torch.tensor(item["labels"])
        return batch


def continuation_logprob(model, prompt_ids: Sequence[int], continuation_ids: Sequence[int]) -> float:
    """The sum of ``log p(continuation token | prompt, earlier tokens)`` under a causal LM, in
    one forward pass over the unpadded sequence."""
    ids = torch.tensor([list(prompt_ids) + list(continuation_ids)], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids)
    positions = torch.arange(start - 1, ids.shape[1] - 1)
    return float(logprobs[positions, ids[0, start:]].sum())
