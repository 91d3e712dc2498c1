"""A tiny Hugging Face model trained with n-best validation: a copyable starting point.

    python examples/hf_demo.py [--out hf-demo-run] [--steps 600] [--eval-steps 100]

A synthetic many-valid-translations corpus (``nbest_eval.analysis.synth``, no download), a
word-level tokenizer and a small T5 built locally, and a ``Seq2SeqTrainer`` with
:class:`nbest_eval.hf.NBestEvalCallback`: at every evaluation the callback generates each
validation prompt's n-best list, scores it against the weighted gold (``eval_map``,
``eval_bleu_100x100``, ...), and the Trainer keeps the checkpoint with the best MAP. It imports only
nbest_eval, transformers, tokenizers, torch and the standard library.
"""

import argparse
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    DataCollatorForSeq2Seq,
    PreTrainedTokenizerFast,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    T5Config,
    T5ForConditionalGeneration,
    set_seed,
)

from nbest_eval.analysis.synth import GOLD_FILE, generate, write_corpus
from nbest_eval.data import InputError
from nbest_eval.hf import NBestEvalCallback

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def word_tokenizer(texts):
    """Every whitespace word of ``texts`` a token; ``</s>`` appended to each encoded text."""
    words = sorted({w for text in texts for w in text.split()})
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(SPECIALS + words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", clean_up_tokenization_spaces=False)


def tiny_t5(tokenizer):
    config = T5Config(vocab_size=len(tokenizer), d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                      relative_attention_num_buckets=16, relative_attention_max_distance=32, dropout_rate=0.0,
                      feed_forward_proj="relu", pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id)
    return T5ForConditionalGeneration(config)


def encode(pairs, tokenizer):
    """(source, target) pairs as the items DataCollatorForSeq2Seq pads."""
    sources = tokenizer([s for s, _ in pairs])["input_ids"]
    targets = tokenizer(text_target=[t for _, t in pairs])["input_ids"]
    return [{"input_ids": s, "labels": t} for s, t in zip(sources, targets)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("hf-demo-run"), help="output directory (default: %(default)s)")
    p.add_argument("--steps", type=int, default=600, help="training steps (default: %(default)s)")
    p.add_argument("--eval-steps", type=int, default=100, help="validate every N steps (default: %(default)s)")
    p.add_argument("--train-pairs", type=int, default=4000, help="synthetic training pairs (default: %(default)s)")
    p.add_argument("--valid-prompts", type=int, default=40, help="validation prompts (default: %(default)s)")
    args = p.parse_args(argv)

    corpus = generate(seed=1, train_pairs=args.train_pairs, valid_prompts=args.valid_prompts)
    data = args.out / "data"
    try:
        write_corpus(data, corpus)  # train.src/.tgt, valid.src/.tgt and the weighted gold, valid.gold.txt
    except InputError as err:
        p.error(str(err))
    tokenizer = word_tokenizer([text for pair in corpus.train + corpus.valid for text in pair])
    set_seed(1)
    model = tiny_t5(tokenizer)

    nbest = NBestEvalCallback(data / GOLD_FILE, tokenizer, data / "valid.src", num_beams=8, max_new_tokens=24,
                              metrics=["map", "wf1", "bleu_1x1", "bleu_100x100"], save_dir=args.out / "nbest")
    training = Seq2SeqTrainingArguments(
        output_dir=str(args.out / "checkpoints"), max_steps=args.steps, learning_rate=3e-3, warmup_steps=50,
        lr_scheduler_type="constant_with_warmup", per_device_train_batch_size=64, eval_strategy="steps",
        eval_steps=args.eval_steps, save_strategy="steps", save_steps=args.eval_steps, logging_steps=args.eval_steps,
        metric_for_best_model="map", greater_is_better=True, load_best_model_at_end=True, report_to="none",
        use_cpu=not torch.cuda.is_available(), seed=1)
    trainer = Seq2SeqTrainer(model=model, args=training, train_dataset=encode(corpus.train, tokenizer),
                             eval_dataset=encode(corpus.valid, tokenizer), processing_class=tokenizer,
                             data_collator=DataCollatorForSeq2Seq(tokenizer, model=model), callbacks=[nbest])
    trainer.train()
    for entry in (e for e in trainer.state.log_history if "eval_map" in e):
        print(f"step {entry['step']:>5}: MAP {entry['eval_map']:.4f}, BLEU 100x100 {entry['eval_bleu_100x100']:.2f}")
    print(f"best MAP {trainer.state.best_metric:.4f}: {trainer.state.best_model_checkpoint}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
