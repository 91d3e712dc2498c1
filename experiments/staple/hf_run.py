"""The Hugging Face run: the SentencePiece model as a fast tokenizer, the recipe (fairseq's own,
read from its configuration, or the first T5 one), ``experiments.hf_toy``'s Trainer with the n-best
callback (in the loop, or ``mode="async"``; none with ``--nbest-mode off``), and its log read back as
summary rows."""

from __future__ import annotations

import argparse
import dataclasses
import re
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from nbest_eval.data import InputError
from nbest_eval.training.devices import sidecar_device

from .settings import FAIRSEQ_CONFIG, METRICS, SPECIALS, fairseq_config
from .summary import TrainingRun, async_rows, async_run, loss_rows, validation

#: --hf-recipe t5, the first Hugging Face recipe, kept for comparison: a T5 at the fairseq model's
#: dimensions without dropout or label smoothing, lr 3e-3 constant after 100 warm-up steps, 64 pairs a
#: batch, validated 32 prompts a generate call
T5_RECIPE = dict(model="t5", d_model=128, layers=3, heads=4, ffn=256, batch_size=64, max_new_tokens=48,
                 eval_batch_size=32)
#: fairseq's --max-tokens 2000 makes batches of 138 training pairs on average on this data (train_bsz in its log)
FAIRSEQ_BATCH_PAIRS = 138


def spm_tokenizer(model: Path):
    """The SentencePiece model as a fast tokenizer: its pieces, scores and ids in a ``tokenizers``
    Unigram model (Viterbi over the same scores gives the same pieces), ``</s>`` appended."""
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    from experiments.hf_toy import wrap_tokenizer

    sp = spm.SentencePieceProcessor(model_file=str(model))
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(len(sp))]
    core = Tokenizer(models.Unigram(vocab, unk_id=SPECIALS["unk_id"]))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return wrap_tokenizer(core)


def hf_recipe(name: str) -> Dict:
    """DemoConfig's model, optimization and generation fields for ``--hf-recipe``. ``fairseq``: the
    fairseq run's own settings, read from its configuration: its architecture at its dimensions
    (:func:`experiments.hf_models.build_fairseq_twin`), dropout, label smoothing, Adam betas, gradient clipping,
    inverse-sqrt schedule with its warm-up, batches of similar lengths holding as many pairs as
    fairseq's on average; n-best lists with its length bound, a prompt done once it has a beam of
    finished hypotheses (fairseq's beam search), 64 prompts a generate call
    (docs/experiments/hf-recipe.md)."""
    if name == "t5":
        return dict(T5_RECIPE)
    c = fairseq_config()
    if c["--arch"] != "transformer" or c["--lr-scheduler"] != "inverse_sqrt" or "--share-all-embeddings" not in c:
        raise InputError("the Hugging Face twin is of a transformer with shared embeddings trained with an "
                         "inverse_sqrt schedule", str(FAIRSEQ_CONFIG))
    betas = tuple(float(b) for b in c["--adam-betas"].strip("()").split(","))
    return dict(model="transformer", d_model=int(c["--encoder-embed-dim"]), layers=int(c["--encoder-layers"]),
                heads=int(c["--encoder-attention-heads"]), ffn=int(c["--encoder-ffn-embed-dim"]),
                dropout=float(c["--dropout"]), label_smoothing=float(c["--label-smoothing"]),
                learning_rate=float(c["--lr"]), lr_scheduler="inverse_sqrt", warmup_steps=int(c["--warmup-updates"]),
                adam_betas=betas, max_grad_norm=float(c["--clip-norm"]), batch_size=FAIRSEQ_BATCH_PAIRS,
                group_by_length=True, max_new_tokens=None, max_len_a=float(c["--nbest-max-len-a"]),
                max_len_b=int(c["--nbest-max-len-b"]), generation_kwargs={"early_stopping": True},
                eval_batch_size=64)


def recipe_settings(name: str) -> Dict:
    """Every DemoConfig field as ``--hf-recipe name`` sets it: the defaults, then the recipe's."""
    from experiments.hf_toy import DemoConfig

    return {**dataclasses.asdict(DemoConfig("")), **hf_recipe(name)}


def eval_batch_size(recipe: Dict, device: Optional[str]) -> Optional[int]:
    """Prompts a validation ``generate`` call: the recipe's on the CPU (its lists as they were); on the
    GPU None, the evaluator's token budget that fills the card. ``device`` None: a run from before --device."""
    return None if device == "cuda" else recipe["eval_batch_size"]


def run_hf(args: argparse.Namespace, out: Path, model: Path, n_pairs: int) -> TrainingRun:
    """Every evaluation's checkpoint is kept (the model alone: what selection and averaging need)."""
    from experiments.hf_toy import DemoConfig, make_trainer

    recipe, sidecar = hf_recipe(args.hf_recipe), sidecar_device(args.device, args.async_device)
    recipe["eval_batch_size"] = eval_batch_size(recipe, args.device)
    steps_per_epoch = -(-n_pairs // recipe["batch_size"])
    config = DemoConfig(output_dir=str(out / "hf"), data=str(out / "data"), max_steps=args.epochs * steps_per_epoch,
                        eval_steps=steps_per_epoch, patience=args.patience or args.epochs,
                        stopping=args.stopping if args.patience else None, seed=args.seed, num_beams=args.beam,
                        metrics=METRICS, save_format="tsv", save_total_limit=None, nbest_mode=args.nbest_mode,
                        async_device=sidecar, device=args.device, precision=args.precision, **recipe)
    trainer = make_trainer(config, tokenizer=spm_tokenizer(model), save_only_model=True)
    started = time.time()
    trainer.train()
    seconds, history = time.time() - started, trainer.state.log_history
    evaluations = [entry for entry in history if "eval_loss" in entry]
    if args.nbest_mode == "off":
        return TrainingRun(loss_rows([{k.removeprefix("eval_"): v for k, v in e.items()} for e in evaluations], "step"),
                           seconds, len(evaluations))
    if args.nbest_mode == "async":
        losses = {entry["step"]: {k.removeprefix("eval_"): v for k, v in entry.items()} for entry in evaluations}
        saved = saved_lists(out)
        rows = async_rows(out / "hf", losses, lambda step: round(losses[step]["epoch"]),
                          lambda epoch, step: saved[step],
                          lambda epoch, step: out / "hf" / f"checkpoint-{step}")
        return async_run(out / "hf", rows, seconds, len(evaluations), sidecar)
    return TrainingRun(hf_rows(out, history), seconds, len(evaluations))


def saved_lists(out: Path) -> Dict[int, Path]:
    """{step: path} of the n-best lists that evaluation saved."""
    return {int(re.search(r"step(\d+)", p.name).group(1)): p for p in (out / "hf" / "nbest").glob("nbest-step*")}


def hf_rows(out: Path, log_history: Sequence[Dict]) -> List[Dict]:
    """summary.json's validations of a Hugging Face run in ``out``: the Trainer's log, the saved lists."""
    saved = saved_lists(out)
    rows = []
    for entry in log_history:
        if "eval_map" in entry:
            line = {k.removeprefix("eval_"): v for k, v in entry.items()}
            rows.append(validation(line, epoch=round(entry["epoch"]), step=entry["step"], nbest=saved[entry["step"]],
                                   checkpoint=out / "hf" / f"checkpoint-{entry['step']}"))
    return rows
