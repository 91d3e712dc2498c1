"""n-best validation on real language: STAPLE en->pt, trained and validated end to end.

    python -m scripts.staple_en_pt --out ../runs/staple-fairseq --framework fairseq [--epochs N] [--seed S]
    python -m scripts.staple_en_pt --out ../runs/staple-hf --framework hf
    python -m scripts.staple_en_pt --out ../runs/dev-split --framework fairseq --split dev   # the 400/100 mode
    python -m scripts.staple_en_pt --analyse --out ../runs/staple-fairseq   # redo a finished run's analysis
    python -m scripts.staple_en_pt --out ../runs/async --framework fairseq --nbest-mode async   # or off

--data is the STAPLE en_pt directory (default: $NBEST_EVAL_STAPLE_DIR, else ../shared/data/staple/en_pt
beside the repository), holding the release's files under their own names.

--split train (default): the 4,000 STAPLE training prompts, each with its most frequent learner
translation and the AWS translation (lowercased, a repeated pair once), validated on all 500 dev
prompts against the full weighted dev gold, matched by STAPLE id. --split dev: a fixed split of the
dev gold into 400 training prompts (pairs sampled by the learner-frequency weights) and 100 held out.

Then a SentencePiece unigram model on the training sentences, and fairseq-train with the
``translation_nbest`` plugin (``--nbest-remove-bpe sentencepiece``) or the Hugging Face Trainer
(``NBestEvalCallback``, the SentencePiece model as tokenizer; ``--hf-recipe fairseq``: fairseq's model
and training recipe, read from configs/staple_transformer.args, as a Marian model; ``t5``: the first
recipe, a T5 that barely learns, kept for comparison), validated at every epoch. Everything a later
analysis needs stays in OUT: every epoch's checkpoint, every validation's n-best list, the
validation gold, the fairseq data-bin. OUT/summary.json has one row per validation (the logged
measures, the loss, timings, the list and checkpoint paths), the AWS 1-best baseline scored on the
same prompts as STAPLE's official scorer does, and the ``selection`` section
(:func:`experiments.staple.selection.analyse`): the epoch each measure peaks at, where ``--patience``
3, 5 and 10 would stop and what they would keep, each pick scored by every measure. Plots: map.png,
curves.png (wF1, P@1), bleu-curves.png, loss.png.

--nbest-mode async: validation hands each epoch's weights to a sidecar (``nbest-eval watch``, a child
process on --async-device) that generates and scores while training goes on; the rows are the
sidecar's results, each with its lag. off: no n-best validation at all (fairseq's plain
``translation`` task; the Trainer without the callback), the baseline for the other two's wall time;
its rows hold the loss alone and there is no analysis. summary.json's ``timing``: the training
command's wall time, the generation it held up (loop), the lags (async).

OUT must not exist yet (or be empty): nothing is replaced. The data is not part of the repository.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

from nbest_eval.data import InputError
from nbest_eval.training.devices import add_device_arguments, check_precision, resolve_device
from nbest_eval.training.early_stopping import DEFAULT_RULE, RULES

from .data import load, require, train_sentencepiece, write_corpus
from .fairseq_run import max_tokens_valid, run_fairseq
from .hf_run import run_hf
from .plots import plot
from .scoring import score_baseline
from .selection import analyse, generation
from .settings import DEFAULT_DATA, DEFAULT_EPOCHS, DEV_AWS, DEV_GOLD, HF_RECIPES, METRICS, NBEST_MODES, SPLIT_SIZES
from .summary import agreement_with_map, in_loop_stopping, timing
from .tables import table


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scripts.staple_en_pt", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="STAPLE en_pt directory (default: %(default)s)")
    p.add_argument("--out", required=True, help="output directory (new or empty)")
    p.add_argument("--framework", choices=("fairseq", "hf"))
    p.add_argument("--analyse", action="store_true",
                   help="OUT is a finished run of this script: redo its analysis (intervals, ties, averages, "
                        "baseline, plots) from what it saved, replacing the run's own summary.json and plots")
    p.add_argument("--split", choices=("train", "dev"), default="train",
                   help="train: the STAPLE training prompts, validated on all dev prompts (default); "
                        "dev: 400/100 prompts of the dev gold")
    epochs = ", ".join(f"{n} {f}" for f, n in DEFAULT_EPOCHS.items())
    p.add_argument("--epochs", type=int, default=None, help=f"training epochs, one validation each (default: {epochs})")
    p.add_argument("--seed", type=int, default=1,
                   help="training seed, and --split dev's pair sampling (default: %(default)s)")
    p.add_argument("--train-prompts", type=int, default=None,
                   help="training prompts (default: all 4,000; --split dev: 400)")
    p.add_argument("--valid-prompts", type=int, default=None,
                   help="validation prompts (default: all 500 dev prompts; --split dev: 100 held out)")
    p.add_argument("--samples-per-prompt", type=int, default=50,
                   help="--split dev: training pairs sampled per training prompt (default: %(default)s)")
    p.add_argument("--vocab-size", type=int, default=2000, help="SentencePiece pieces (default: %(default)s)")
    p.add_argument("--beam", type=int, default=16, help="beam size = n-best length (default: %(default)s)")
    p.add_argument("--hf-recipe", choices=HF_RECIPES, default="fairseq",
                   help="--framework hf: fairseq (the twin of fairseq's model and recipe, read from "
                        "configs/staple_transformer.args) or t5 (the first recipe; default: %(default)s)")
    p.add_argument("--patience", type=int, default=None, metavar="P",
                   help="train with early stopping on MAP (--stopping's rule, patience P); default: no early "
                        "stopping, every epoch trained (patience and every rule are replayed afterwards)")
    p.add_argument("--stopping", choices=RULES, default=DEFAULT_RULE,
                   help="the early-stopping rule with --patience (default: %(default)s)")
    p.add_argument("--nbest-mode", choices=NBEST_MODES, default="loop",
                   help="n-best validation in the training loop (default), handed off to a sidecar (async), "
                        "or none (off: the baseline for wall time)")
    p.add_argument("--async-device", default=None, metavar="DEV",
                   help="--nbest-mode async: where the sidecar generates (cpu, cuda:N; default: beside training, "
                        "on the GPU the same one)")
    add_device_arguments(p)
    p.add_argument("--average", type=int, default=5, metavar="K",
                   help="average the K best checkpoints by MAP, and the last K (default: %(default)s)")
    p.add_argument("--no-analysis", action="store_true",
                   help="stop after training and summary.json: no selection analysis, averages or plots "
                        "(--analyse OUT makes them later)")
    args = p.parse_args(argv)
    if args.average < 1:
        p.error("--average must be at least 1")
    if args.analyse:
        return args
    if args.framework is None:
        p.error("the following arguments are required: --framework (unless --analyse)")
    if args.nbest_mode == "off" and args.patience:
        p.error("--patience needs n-best validation: not with --nbest-mode off")
    if args.epochs is None:
        args.epochs = DEFAULT_EPOCHS[args.framework]
    default_train, default_valid = SPLIT_SIZES[args.split]
    args.train_prompts = default_train if args.train_prompts is None else args.train_prompts
    args.valid_prompts = default_valid if args.valid_prompts is None else args.valid_prompts
    for name in ("epochs", "train_prompts", "valid_prompts", "samples_per_prompt", "vocab_size", "beam", "patience"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its threads
    # as the nbest-eval command does; first, so that importing fairseq's tasks (which configures logging
    # at DEBUG where nothing has) leaves the console to the script's own lines
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    if args.analyse:
        return reanalyse(args)
    start = time.time()
    try:
        args.device = resolve_device(args.device)
        check_precision(args.framework, args.device, args.precision)
        gold, corpus = load(args)
        out = prepare_out(args.out)
    except (InputError, OSError) as err:
        print(f"staple_en_pt.py: error: {err}", file=sys.stderr)
        return 2
    write_corpus(out / "data", corpus)
    baseline = score_baseline(args.data / DEV_AWS, gold, corpus.valid)
    model = train_sentencepiece(corpus.sentences, out / "spm", args.vocab_size)
    print(f"--split {args.split}: {corpus.train_prompts} training prompts ({len(corpus.pairs)} pairs), "
          f"{len(corpus.valid)} validation prompts; SentencePiece model {model}", flush=True)
    run = run_fairseq(args, out, model) if args.framework == "fairseq" else run_hf(args, out, model, len(corpus.pairs))
    rows, scored = run.rows, args.nbest_mode != "off"
    analysed = bool(rows) and scored and not args.no_analysis
    train_seconds = time.time() - start
    valid_gold = out / "data" / "valid.gold.txt"
    summary = {"framework": args.framework, "split": args.split, "data": str(args.data.resolve()),
               "seed": args.seed, "epochs": args.epochs, "train_prompts": corpus.train_prompts,
               "device": args.device, "precision": args.precision,
               "max_tokens_valid": max_tokens_valid(args) if args.framework == "fairseq" else None,
               "nbest_mode": args.nbest_mode, "timing": timing(run, args.nbest_mode),
               "early_stopping": in_loop_stopping(run, args),
               "train_pairs": len(corpus.pairs), "valid_prompts": len(corpus.valid), "vocab_size": args.vocab_size,
               "beam": args.beam, "hf_recipe": args.hf_recipe if args.framework == "hf" else None,
               "metrics": list(METRICS), "valid_gold": str(valid_gold),
               "data_bin": str(out / "fairseq" / "data-bin") if args.framework == "fairseq" else None,
               "sentencepiece": str(model), "validations": rows, "baseline": baseline, "selection": {},
               "agreement_with_map": agreement_with_map(rows) if scored else {},
               "train_seconds": round(train_seconds, 1)}
    # written before the analysis too: a run whose analysis fails is still one that --analyse can finish
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if analysed:
        summary["selection"] = analyse(out, rows, corpus.valid, generation=generation(summary, out, args.average))
    summary["seconds"] = round(time.time() - start, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if analysed:
        plot(summary["selection"], out, title(summary))
    report(out, summary)
    return 0


def prepare_out(path: str) -> Path:
    out = Path(path).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("exists and is not an empty directory; choose another --out", str(out))
    out.mkdir(parents=True, exist_ok=True)
    return out


def reanalyse(args: argparse.Namespace) -> int:
    """--analyse: a finished run's summary.json, selection.txt and plots made again from what it saved."""
    from nbest_eval.formats import read_gold

    out = Path(args.out).resolve()
    try:
        summary = json.loads((out / "summary.json").read_text())
        gold, valid = read_gold(str(require(args.data, DEV_GOLD))), read_gold(summary["valid_gold"])
    except (InputError, OSError, ValueError, KeyError) as err:
        print(f"staple_en_pt.py: error: --analyse {out}: not a finished run ({err})", file=sys.stderr)
        return 2
    if summary.get("nbest_mode") == "off":
        print(f"staple_en_pt.py: error: --analyse {out}: a run with --nbest-mode off has no n-best lists to analyse",
              file=sys.stderr)
        return 2
    summary["baseline"] = score_baseline(args.data / DEV_AWS, gold, valid)
    summary["selection"] = analyse(out, summary["validations"], valid,
                                   generation=generation(summary, out, args.average)
                                   ) if summary["validations"] else {}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if summary["validations"]:
        plot(summary["selection"], out, title(summary), overwrite=True)
    report(out, summary)
    return 0


def title(summary: Dict) -> str:
    return f"STAPLE en->pt, {summary['valid_prompts']} validation prompts ({summary['framework']})"


def report(out: Path, summary: Dict) -> None:
    clock = summary.get("timing") or {}
    if clock.get("nbest_mode") == "off":
        print(f"--nbest-mode off: {clock['epochs_trained']} epochs trained in {clock['training_seconds']:.0f} s, "
              "no n-best validation")
    else:
        print(table(summary["validations"], summary["baseline"]))
        selection = out / "selection.txt"
        print(selection.read_text() if selection.is_file() else "no validation" if not summary["validations"]
              else "no analysis (--no-analysis; --analyse OUT makes it)")
    if clock.get("nbest_mode") == "async":
        print(f"--nbest-mode async: training {clock['training_seconds']:.0f} s (the wait for the sidecar at the end "
              f"included), sidecar on {clock['sidecar_device']}; lag mean {clock['lag_seconds']['mean']:.0f} s, "
              f"max {clock['lag_seconds']['max']:.0f} s ({clock['lag_validations_max']} validation(s))")
    stopping = summary.get("early_stopping")
    if stopping:
        print(f"trained with early stopping ({stopping['rule']} on {stopping['metric']}, patience "
              f"{stopping['patience']}): " + (f"stopped after epoch {stopping['stopped_after']}"
                                              if stopping["stopped_after"] else "no stop") +
              f", kept epoch {stopping['kept']}")
    where = f" on {summary['device']} ({summary['precision']})" if "device" in summary else ""
    print(f"{summary.get('seconds', summary['train_seconds']):.0f} s{where}; {out / 'summary.json'}")
