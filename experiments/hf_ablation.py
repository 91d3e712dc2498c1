#!/usr/bin/env python
"""Why the first Hugging Face recipe barely learned STAPLE: each model and recipe trained on a
``scripts.staple_en_pt`` run's pairs, its validation NLL (bits a target token, fairseq's unit) after each epoch.

    python -m scripts.hf_ablation --run RUN --model twin --recipe fairseq --epochs 12
    python -m scripts.hf_ablation --run RUN --model t5 --recipe t5 --epochs 12      # the first recipe

--model: ``twin`` (fairseq's transformer as a Marian model with fairseq's initialization,
``experiments.hf_models.fairseq_init``), ``twin-xavier`` (the same with Xavier-uniform feed-forward layers and zero
biases: the twin's first initialization), ``marian`` (the same with transformers' init) or ``t5`` (the
first recipe's model, at the same dimensions). --recipe: ``fairseq`` (staple_en_pt's ``--hf-recipe
fairseq`` training settings) or ``t5`` (the first recipe's: no dropout or label smoothing, lr 3e-3
constant after 100 steps, 64 pairs a batch). --dropout and --label-smoothing override the recipe's.
The NLL is the validation prompts' most frequent translations' (RUN/data/valid.tgt), as fairseq's
``valid_nll_loss``; no n-best lists are made.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.hf_ablation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, type=Path, help="a scripts.staple_en_pt run (its data/ and spm.model)")
    p.add_argument("--model", choices=("twin", "twin-xavier", "marian", "t5"), default="twin")
    p.add_argument("--recipe", choices=("fairseq", "t5"), default="fairseq")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--dropout", type=float, help="instead of the recipe's")
    p.add_argument("--label-smoothing", type=float, help="instead of the recipe's")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write one JSON line an epoch here")
    return p.parse_args(argv)


def build(model: str, recipe: dict, tokenizer, seed: int):
    from experiments import hf_models, hf_toy

    sizes = {k: recipe[k] for k in ("d_model", "layers", "heads", "ffn", "dropout")}
    if model == "t5":
        return hf_toy.build_model(tokenizer, seed, **sizes)
    if model == "twin":
        return hf_models.build_fairseq_twin(tokenizer, seed, **sizes)
    if model == "twin-xavier":
        return xavier_everywhere(hf_models.build_fairseq_twin(tokenizer, seed, **sizes), seed)
    return hf_models.build_seq2seq(tokenizer, "marian", seed, activation_function="relu", scale_embedding=True,
                                   **sizes)


def xavier_everywhere(model, seed: int):
    """The initialization the first run of the fairseq twin had: fairseq's for the embeddings and the
    attention, but the feed-forward layers Xavier-uniform too and every bias zero."""
    import torch

    torch.manual_seed(seed)
    embeddings = model.get_input_embeddings()
    torch.nn.init.normal_(embeddings.weight, 0.0, embeddings.embedding_dim ** -0.5)
    with torch.no_grad():
        embeddings.weight[embeddings.padding_idx].zero_()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module is not model.get_output_embeddings():
            gain = 2 ** -0.5 if name.rsplit(".", 1)[-1] in ("q_proj", "k_proj", "v_proj") else 1.0
            torch.nn.init.xavier_uniform_(module.weight, gain=gain)
            torch.nn.init.zeros_(module.bias)
    return model


def validation_nll(model, dataset, collator) -> float:
    """Bits a target token (</s> included) on ``dataset``, in eval mode."""
    import torch

    total, tokens = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, len(dataset), 100):
            batch = collator([dataset[i] for i in range(start, min(start + 100, len(dataset)))])
            logprobs = torch.log_softmax(model(**batch).logits.float(), -1)
            labels = batch["labels"]
            kept = labels.ne(-100)
            total -= float(logprobs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)[kept].sum())
            tokens += int(kept.sum())
    model.train()
    return total / tokens / math.log(2)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback

    from experiments import hf_toy
    from experiments.staple.hf_run import recipe_settings, spm_tokenizer

    recipe = recipe_settings(args.recipe)
    for name in ("dropout", "label_smoothing"):
        if getattr(args, name) is not None:
            recipe[name] = getattr(args, name)
    tokenizer = spm_tokenizer(args.run / "spm.model")
    train, valid = (hf_toy.PairDataset(hf_toy.load_pairs(args.run / "data", split), tokenizer)
                    for split in ("train", "valid"))
    model = build(args.model, recipe, tokenizer, args.seed)
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    out = None if args.json is None else args.json.open("w")
    start = time.time()

    class EachEpoch(TrainerCallback):
        """Validates at an epoch's end; prints when the Trainer logs the epoch's training loss, just after."""

        row: dict = {}

        def on_epoch_end(self, _args, state, control, model=None, **kwargs):
            self.row = {"epoch": round(state.epoch), "step": state.global_step,
                        "valid_nll_bits": round(validation_nll(model, valid, collator), 4)}

        def on_log(self, _args, state, control, logs=None, **kwargs):
            if self.row and "loss" in (logs or {}):
                row = {**self.row, "train_loss_nats": logs["loss"], "seconds": round(time.time() - start)}
                self.row = {}
                print(json.dumps(row), flush=True)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()

    scratch = tempfile.TemporaryDirectory()  # the Trainer wants an output directory; nothing is saved
    training = Seq2SeqTrainingArguments(
        output_dir=scratch.name, num_train_epochs=args.epochs, save_strategy="no",
        eval_strategy="no", logging_strategy="epoch", seed=args.seed, data_seed=args.seed, report_to="none",
        dataloader_num_workers=0, disable_tqdm=True, use_cpu=True, per_device_train_batch_size=recipe["batch_size"],
        learning_rate=recipe["learning_rate"], lr_scheduler_type=recipe["lr_scheduler"],
        warmup_steps=recipe["warmup_steps"], adam_beta1=recipe["adam_betas"][0], adam_beta2=recipe["adam_betas"][1],
        max_grad_norm=recipe["max_grad_norm"], label_smoothing_factor=recipe["label_smoothing"],
        **hf_toy.group_by_length(recipe["group_by_length"]))
    Seq2SeqTrainer(model=model, args=training, train_dataset=train, data_collator=collator, processing_class=tokenizer,
                   callbacks=[EachEpoch()]).train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
