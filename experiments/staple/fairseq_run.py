"""The fairseq run: the SentencePiece pieces preprocessed, ``fairseq-train`` with the
``translation_nbest`` plugin validating every epoch (in the loop, or handing off to a sidecar with
``--nbest-mode async``; ``off``: plain ``translation``, the baseline), and its log read back as summary rows."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from nbest_eval.fairseq.command_line import fairseq_command, plain_translation
from nbest_eval.training.devices import fairseq_words, sidecar_device

from .data import write_lines
from .settings import CUDA_MAX_TOKENS_VALID, FAIRSEQ_CONFIG, METRICS, SPECIALS, fairseq_config
from .summary import TrainingRun, async_rows, async_run, loss_rows, validation


def run_fairseq(args: argparse.Namespace, out: Path, model: Path) -> TrainingRun:
    import sentencepiece as spm

    from nbest_eval.fairseq import USER_DIR

    pieces = spm.SentencePieceProcessor(model_file=str(model))
    encoded = out / "fairseq" / "pieces"
    encoded.mkdir(parents=True)
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        lines = (out / "data" / name).read_text(encoding="utf-8").splitlines()
        write_lines(encoded / name, [" ".join(pieces.encode(line, out_type=str)) for line in lines])
    # the dictionary is the SentencePiece vocabulary: a piece that the training pairs happen to lack
    # is still no <unk>, so every validation source decodes to its prompt
    write_lines(encoded / "dict.txt", [f"{pieces.id_to_piece(i)} 1" for i in range(len(SPECIALS), len(pieces))])
    run([*fairseq_command("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", str(encoded / "dict.txt"),
         "--trainpref", str(encoded / "train"), "--validpref", str(encoded / "valid"),
         "--destdir", str(out / "fairseq" / "data-bin"), "--workers", "1"], out / "fairseq" / "preprocess.log")
    log, checkpoints = out / "fairseq" / "train.log", out / "fairseq" / "checkpoints"
    started = time.time()
    run([*fairseq_command("fairseq-train"), str(out / "fairseq" / "data-bin"), "--user-dir", USER_DIR,
         *train_options(args, out), "--save-dir", str(checkpoints), "--max-epoch", str(args.epochs),
         "--seed", str(args.seed)], log)
    seconds, lines = time.time() - started, valid_lines(log)
    if args.nbest_mode == "off":
        return TrainingRun(loss_rows(lines, "num_updates"), seconds, len(lines))
    if args.nbest_mode == "async":
        losses, saved = {int(line["num_updates"]): line for line in lines}, saved_lists(out)
        rows = async_rows(checkpoints, losses, lambda step: int(losses[step]["epoch"]),
                          lambda epoch, step: saved[(epoch, step)],
                          lambda epoch, step: checkpoints / f"checkpoint{epoch}.pt")
        return async_run(checkpoints, rows, seconds, len(lines), sidecar_device(args.device, args.async_device))
    return TrainingRun(fairseq_rows(out), seconds, len(lines))


def train_options(args: argparse.Namespace, out: Path) -> List[str]:
    """configs/staple_transformer.args on ``--device`` in ``--precision`` with the n-best validation of
    ``--nbest-mode``; off: plain ``translation``, no n-best option, the best checkpoint by loss."""
    config = [*shlex.split(FAIRSEQ_CONFIG.read_text(), comments=True), *fairseq_words(args.device, args.precision),
              "--max-tokens-valid", str(max_tokens_valid(args))]
    if args.nbest_mode == "off":
        return plain_translation(config)
    mode = ["--nbest-mode", "async", "--nbest-async-device", sidecar_device(args.device, args.async_device)
            ] if args.nbest_mode == "async" else []
    return [*config, "--nbest-gold", str(out / "data" / "valid.gold.txt"), "--nbest-remove-bpe", "sentencepiece",
            "--nbest-beam", str(args.beam), "--nbest-metrics", ",".join(METRICS),
            "--nbest-save-dir", str(out / "nbest"),
            *mode, *(["--patience", str(args.patience), "--nbest-stopping", args.stopping] if args.patience else [])]


def max_tokens_valid(args: argparse.Namespace) -> int:
    """fairseq's validation batches in tokens, which n-best generation uses too: the configuration's
    --max-tokens on the CPU (fairseq's default for them), :data:`CUDA_MAX_TOKENS_VALID` on the GPU."""
    return CUDA_MAX_TOKENS_VALID if args.device == "cuda" else int(fairseq_config()["--max-tokens"])


def fairseq_rows(out: Path) -> List[Dict]:
    """summary.json's validations of a fairseq run in ``out``: its log's valid lines, its saved lists."""
    saved = saved_lists(out)
    rows = []
    for line in valid_lines(out / "fairseq" / "train.log"):
        epoch, step = int(line["epoch"]), int(line["num_updates"])
        rows.append(validation(line, epoch=epoch, step=step, nbest=saved[(epoch, step)],
                               checkpoint=out / "fairseq" / "checkpoints" / f"checkpoint{epoch}.pt"))
    return rows


def saved_lists(out: Path) -> Dict:
    """{(epoch, update): path} of the n-best lists that validation saved."""
    records = [json.loads(path.read_text()) for path in (out / "nbest").glob("*.json")]  # one a saved list
    return {(r["epoch"], r["num_updates"]): out / "nbest" / r["nbest"] for r in records}


def run(command: List[str], log: Path) -> None:
    """Run a command, its output into ``log``; on failure show the log's tail."""
    print(f"$ {' '.join(shlex.quote(c) for c in command)}", flush=True)
    with open(log, "w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if code:
        tail = "".join(open(log).readlines()[-30:])
        sys.exit(f"{Path(sys.argv[0]).name}: command failed (exit {code}); the end of {log}:\n{tail}")


def valid_lines(log: Path) -> List[Dict]:
    """fairseq's JSON valid lines (one per validation)."""
    rows = []
    for line in log.read_text().splitlines():
        start = line.find("{")
        if start >= 0 and '"valid_' in line:
            try:
                row = json.loads(line[start:])
            except ValueError:
                continue
            rows.append({k.removeprefix("valid_"): v for k, v in row.items()})
    return rows
