#!/usr/bin/env python
"""Train a tiny T5 on the synthetic corpus with n-best validation, best-model selection on
``eval_map`` and early stopping (Hugging Face ``Seq2SeqTrainer`` + ``NBestEvalCallback``).

    python -m scripts.train_hf --output-dir runs/hf --data synth          # one process
    torchrun --nproc_per_node 2 -m scripts.train_hf --output-dir runs/hf  # two (CPU: gloo)

``--data`` is a directory made by ``nbest-eval synth``; it is generated when absent. The output
directory gets a ``checkpoint-STEP`` per evaluation, each evaluation's n-best lists under
``nbest/`` (``nbest-eval score --gold DATA/valid.gold.txt --nbest OUTPUT_DIR/nbest/nbest-stepSTEP.jsonl``
re-scores them), the best model with its tokenizer, the final ``trainer_state.json`` (its
``log_history`` holds every evaluation's ``eval_map``, ``eval_bleu_100x100``, ...) and ``summary.json``:
the device and precision trained in, the step stopped at, the best ``eval_map`` and its checkpoint.

``--device auto`` (the default) trains on the GPU when torch sees one; ``--precision bf16|fp16`` is the
Trainer's ``bf16=``/``fp16=`` mixed precision, which validation generates in too (fp16 on a GPU only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from nbest_eval.training.devices import add_device_arguments  # imports no framework
from nbest_eval.training.early_stopping import RULES


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.train_hf", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", required=True, help="checkpoints, n-best lists, trainer_state.json")
    p.add_argument("--data", default="synth",
                   help="synthetic corpus directory, generated when absent (default: %(default)s)")
    p.add_argument("--max-steps", type=int, default=3000, help="training steps at most (default: %(default)s)")
    p.add_argument("--eval-steps", type=int, default=250,
                   help="evaluate and checkpoint every N steps (default: %(default)s)")
    p.add_argument("--patience", type=int, default=4,
                   help="early stopping: evaluations without a better eval_map (default: %(default)s)")
    p.add_argument("--stopping", choices=RULES,
                   help="stop by this nbest-eval early-stopping rule on eval_map (NBestEarlyStoppingCallback, whose "
                        "kept checkpoint is the one loaded at the end) instead of transformers' EarlyStoppingCallback")
    p.add_argument("--seed", type=int, default=1, help="training seed (default: %(default)s)")
    p.add_argument("--train-pairs", type=int, default=20000,
                   help="corpus size when --data is generated (default: %(default)s)")
    p.add_argument("--valid-prompts", type=int, default=200,
                   help="valid prompts when --data is generated (default: %(default)s)")
    p.add_argument("--eval-prompts", type=int, help="score a fixed random subset of this many valid prompts")
    p.add_argument("--num-beams", type=int, default=8, help="beam size = n-best length (default: %(default)s)")
    p.add_argument("--learning-rate", type=float, default=3e-3, help="(default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="training pairs per step and process (default: %(default)s)")
    p.add_argument("--metrics", default="map,rr,ndcg10,ap_t,wf1,pref_spearman,bleu_1x1,bleu_100x100",
                   help="n-best metric keys (default: %(default)s)")
    p.add_argument("--report-to", default="none", help="Trainer reporters, e.g. tensorboard (default: %(default)s)")
    p.add_argument("--no-save-nbest", action="store_true", help="do not write the n-best lists of each evaluation")
    add_device_arguments(p)
    return p.parse_args(argv)


def summary(state, max_steps: int, output_dir: Path, metric: str = "eval_map") -> str:
    """The table of evaluations and the closing line printed after training (``state``: a TrainerState)."""
    lines = ["", "step  eval_map  eval_bleu_1x1  eval_loss  generate_s  score_s"]
    for entry in state.log_history:
        if "eval_map" in entry:
            bleu = entry.get("eval_bleu_1x1", float("nan"))
            lines.append(f"{entry['step']:>4}  {entry['eval_map']:.4f}    {bleu:7.2f}"
                         f"        {entry.get('eval_loss', float('nan')):.4f}     {entry['eval_nbest_gen_s']:.2f}"
                         f"        {entry['eval_nbest_score_s']:.2f}")
    stopped = "early stopping" if state.global_step < max_steps else "max steps"
    best = (f"best {metric} {state.best_metric:.4f} at {state.best_model_checkpoint}"
            if state.best_metric is not None else "no evaluation ran, so no best model")
    lines.append(f"stopped at step {state.global_step} ({stopped}); {best}; trainer state in "
                 f"{output_dir / 'trainer_state.json'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its threads
    from nbest_eval.data import InputError

    try:
        return train(args)
    except InputError as err:
        print(f"train_hf.py: error: {err}", file=sys.stderr)
        return 2


def train(args: argparse.Namespace) -> int:
    from experiments.hf_toy import DemoConfig, make_trainer
    from nbest_eval.data import InputError

    config = DemoConfig(
        output_dir=args.output_dir, data=args.data, max_steps=args.max_steps, eval_steps=args.eval_steps,
        patience=args.patience, stopping=args.stopping, seed=args.seed, train_pairs=args.train_pairs,
        valid_prompts=args.valid_prompts,
        eval_prompts=args.eval_prompts, num_beams=args.num_beams, learning_rate=args.learning_rate,
        batch_size=args.batch_size, metrics=[m.strip() for m in args.metrics.split(",") if m.strip()],
        report_to=[] if args.report_to == "none" else args.report_to.split(","), save_nbest=not args.no_save_nbest,
        device=args.device, precision=args.precision)
    if "map" not in config.metrics:
        raise InputError("--metrics must include map (the metric for best model)")
    trainer = make_trainer(config)
    trainer.train()
    trainer.save_model()   # the best model (load_best_model_at_end) and its tokenizer, in --output-dir
    trainer.save_state()   # --output-dir/trainer_state.json
    if trainer.is_world_process_zero():
        metric = trainer.args.metric_for_best_model
        print(summary(trainer.state, args.max_steps, Path(args.output_dir),
                      metric if metric.startswith("eval_") else f"eval_{metric}"))
        write_summary(trainer, args.precision, Path(args.output_dir) / "summary.json")
    return 0


def write_summary(trainer, precision: str, path: Path) -> None:
    """``summary.json``: where and in what precision the run trained, where it stopped, its best model."""
    state = trainer.state
    record = {"device": trainer.args.device.type, "precision": precision, "global_step": state.global_step,
              "best_metric": state.best_metric, "best_model_checkpoint": state.best_model_checkpoint}
    path.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
