#!/usr/bin/env python
"""n-best validation on real language: the STAPLE en->pt dev gold, end to end.

    python scripts/staple_en_pt.py --gold ../shared/data/staple/en_pt/dev.en_pt.2020-02-20.gold.txt \\
        --out runs/staple-fairseq --framework fairseq [--epochs N] [--seed S]
    python scripts/staple_en_pt.py --gold GOLD --out runs/staple-hf --framework hf

1. A fixed split of the gold's prompts (the same for every --seed): 100 held out, 400 for training.
2. Training pairs sampled from each training prompt's translations by their learner-frequency
   weights (--samples-per-prompt, seeded by --seed).
3. A SentencePiece unigram model trained on the training prompts and all their translations.
4. fairseq-train with the ``translation_nbest`` plugin on the pieces (``--nbest-remove-bpe
   sentencepiece``), or the Hugging Face example (a small T5, ``NBestEvalCallback``) with the
   SentencePiece model as its tokenizer; validated at every epoch on the 100 held-out prompts
   against their real gold, matched by STAPLE id.
5. ``OUT/summary.json`` (one object per validation: map, bleu_1x1, bleu_100x100, wf1, n_prompts,
   generation and scoring seconds, the saved n-best list), ``OUT/curves.png`` (MAP, wF1) and
   ``OUT/bleu-curves.png``, and a table on stdout.

The gold is not part of the repository. OUT must not exist yet (or be empty): nothing is replaced.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import string
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "examples"), str(REPO)]  # the examples' building blocks; nbest_eval in a checkout

from nbest_eval.data import Gold, InputError  # noqa: E402
from nbest_eval.formats.common import join_lines  # noqa: E402

METRICS = ("map", "bleu_1x1", "bleu_100x100", "wf1")
SPLIT_SALT = "staple-en-pt-split"  # the split depends on this and the prompt ids only, never on --seed
SPECIALS = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}  # the Hugging Face example's ids


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="staple_en_pt.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gold", required=True, help="STAPLE en_pt gold (e.g. dev.en_pt.2020-02-20.gold.txt)")
    p.add_argument("--out", required=True, help="output directory (new or empty)")
    p.add_argument("--framework", choices=("fairseq", "hf"), required=True)
    p.add_argument("--epochs", type=int, default=None,
                   help="training epochs, one validation each (default: 15 fairseq, 10 hf)")
    p.add_argument("--seed", type=int, default=1, help="pair sampling and training seed (default: %(default)s)")
    p.add_argument("--valid-prompts", type=int, default=100, help="held-out prompts (default: %(default)s)")
    p.add_argument("--train-prompts", type=int, default=400, help="training prompts (default: %(default)s)")
    p.add_argument("--samples-per-prompt", type=int, default=50,
                   help="training pairs sampled per training prompt (default: %(default)s)")
    p.add_argument("--vocab-size", type=int, default=2000, help="SentencePiece pieces (default: %(default)s)")
    p.add_argument("--beam", type=int, default=16, help="beam size = n-best length (default: %(default)s)")
    args = p.parse_args(argv)
    if args.epochs is None:
        args.epochs = 15 if args.framework == "fairseq" else 10
    for name in ("epochs", "valid_prompts", "train_prompts", "samples_per_prompt", "vocab_size", "beam"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


# -- data ---------------------------------------------------------------------------------------


def split_prompts(gold: Gold, n_valid: int, n_train: int) -> Tuple[Gold, Gold]:
    """(training, held-out) prompts: the gold's prompts ordered by a salted hash of their id, the
    first ``n_valid`` held out, the next ``n_train`` for training. Fixed for a given gold."""
    if n_valid + n_train > len(gold):
        raise InputError(f"{n_valid} held-out + {n_train} training prompts asked, the gold has {len(gold)}",
                         gold.path)
    order = sorted(gold, key=lambda p: hashlib.sha256(f"{SPLIT_SALT}:{p.id}".encode()).hexdigest())
    return Gold(order[n_valid:n_valid + n_train], gold.path), Gold(order[:n_valid], gold.path)


def sample_pairs(train: Gold, per_prompt: int, seed: int) -> List[Tuple[str, str]]:
    """``per_prompt`` (prompt, translation) pairs per prompt, translations drawn by weight."""
    rng = random.Random(seed)
    pairs = []
    for prompt in train:
        texts = [t for t, _ in prompt.translations]
        weights = [w for _, w in prompt.translations]
        pairs += [(prompt.text, t) for t in rng.choices(texts, weights, k=per_prompt)]
    rng.shuffle(pairs)
    return pairs


def write_lines(path: Path, lines: Sequence[str]) -> None:
    path.write_text(join_lines(lines), encoding="utf-8")


def write_corpus(data: Path, pairs: Sequence[Tuple[str, str]], valid: Gold) -> None:
    """``data/{train,valid}.{src,tgt}`` in raw text (valid.tgt: each prompt's most frequent
    translation, for the loss) and ``data/valid.gold.txt``, the held-out gold."""
    from nbest_eval.formats import write_gold

    data.mkdir(parents=True)
    write_lines(data / "train.src", [s for s, _ in pairs])
    write_lines(data / "train.tgt", [t for _, t in pairs])
    write_lines(data / "valid.src", [p.text for p in valid])
    write_lines(data / "valid.tgt", [p.translations[0][0] for p in valid])
    write_gold(valid, data / "valid.gold.txt")


def train_sentencepiece(train: Gold, prefix: Path, vocab_size: int) -> Path:
    """A unigram model over the training prompts and all their translations (distinct sentences,
    so that sampling weights do not skew the pieces); no normalization, so decoding restores the
    text exactly; every printable ASCII character a piece, so that a held-out prompt with a
    character the training prompts lack (a digit) still decodes to itself."""
    import sentencepiece as spm

    sentences = sorted({p.text for p in train} | {t for p in train for t, _ in p.translations})
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=str(prefix), vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, normalization_rule_name="identity",
        required_chars=string.ascii_letters + string.digits + string.punctuation,
        hard_vocab_limit=False, pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", unk_piece="<unk>",
        minloglevel=2, **SPECIALS)
    return prefix.with_suffix(".model")


# -- fairseq ------------------------------------------------------------------------------------


def run_fairseq(args: argparse.Namespace, out: Path, model: Path) -> List[Dict]:
    import sentencepiece as spm
    from fairseq_demo import run, tool, valid_lines

    from nbest_eval.fairseq import USER_DIR

    pieces = spm.SentencePieceProcessor(model_file=str(model))
    encoded = out / "fairseq" / "pieces"
    encoded.mkdir(parents=True)
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        lines = (out / "data" / name).read_text(encoding="utf-8").splitlines()
        write_lines(encoded / name, [" ".join(pieces.encode(line, out_type=str)) for line in lines])
    # the dictionary is the SentencePiece vocabulary: a piece that the sampled pairs happen to lack
    # is still no <unk>, so every held-out source decodes to its prompt
    write_lines(encoded / "dict.txt", [f"{pieces.id_to_piece(i)} 1" for i in range(len(SPECIALS), len(pieces))])
    run([tool("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", str(encoded / "dict.txt"),
         "--trainpref", str(encoded / "train"), "--validpref", str(encoded / "valid"),
         "--destdir", str(out / "fairseq" / "data-bin"), "--workers", "1"], out / "fairseq" / "preprocess.log")
    config = shlex.split((REPO / "configs" / "staple_transformer.args").read_text(), comments=True)
    log = out / "fairseq" / "train.log"
    run([tool("fairseq-train"), str(out / "fairseq" / "data-bin"), "--user-dir", USER_DIR, *config,
         "--nbest-gold", str(out / "data" / "valid.gold.txt"), "--nbest-remove-bpe", "sentencepiece",
         "--nbest-beam", str(args.beam), "--nbest-metrics", ",".join(METRICS), "--nbest-save-dir", str(out / "nbest"),
         "--save-dir", str(out / "fairseq" / "checkpoints"), "--max-epoch", str(args.epochs),
         "--seed", str(args.seed)], log)
    records = [json.loads(path.read_text()) for path in (out / "nbest").glob("*.json")]  # one a saved list
    saved = {(r["epoch"], r["num_updates"]): out / "nbest" / r["nbest"] for r in records}
    rows = []
    for line in valid_lines(log):
        epoch, step = int(line["epoch"]), int(line["num_updates"])
        rows.append(validation(line, epoch=epoch, step=step, nbest=saved[(epoch, step)]))
    return rows


# -- Hugging Face -------------------------------------------------------------------------------


def spm_tokenizer(model: Path):
    """The SentencePiece model as a fast tokenizer: its pieces, scores and ids in a ``tokenizers``
    Unigram model (Viterbi over the same scores gives the same pieces), ``</s>`` appended."""
    import sentencepiece as spm
    from hf_toy import wrap_tokenizer
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    sp = spm.SentencePieceProcessor(model_file=str(model))
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(len(sp))]
    core = Tokenizer(models.Unigram(vocab, unk_id=SPECIALS["unk_id"]))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return wrap_tokenizer(core)


def run_hf(args: argparse.Namespace, out: Path, model: Path, n_pairs: int) -> List[Dict]:
    from hf_toy import DemoConfig, make_trainer

    batch = 64
    steps_per_epoch = -(-n_pairs // batch)
    config = DemoConfig(output_dir=str(out / "hf"), data=str(out / "data"), max_steps=args.epochs * steps_per_epoch,
                        eval_steps=steps_per_epoch, patience=args.epochs, seed=args.seed, batch_size=batch,
                        d_model=128, ffn=256, layers=3, num_beams=args.beam, max_new_tokens=48,
                        metrics=METRICS, save_format="tsv", save_total_limit=1)
    trainer = make_trainer(config, tokenizer=spm_tokenizer(model))
    trainer.train()
    saved = {int(re.search(r"step(\d+)", p.name).group(1)): p for p in trainer.nbest.saved}  # nbest-step{N}.tsv
    rows = []
    for entry in trainer.state.log_history:
        if "eval_map" in entry:
            line = {k.removeprefix("eval_"): v for k, v in entry.items()}
            rows.append(validation(line, epoch=round(entry["epoch"]), step=entry["step"],
                                   nbest=saved[entry["step"]]))
    return rows


# -- summary ------------------------------------------------------------------------------------


def validation(line: Dict, *, epoch: int, step: int, nbest: Path) -> Dict:
    """One validation's row of summary.json, from a logged line with the ``eval_``/``valid_`` prefix removed."""
    row = {"epoch": epoch, "step": step, **{k: float(line[k]) for k in METRICS},
           "n_prompts": int(line["nbest_prompts"]), "gen_seconds": float(line["nbest_gen_s"]),
           "score_seconds": float(line["nbest_score_s"]), "overhead_seconds": float(line["nbest_overhead_s"]),
           "nbest": str(nbest)}
    if "loss" in line:
        row["loss"] = float(line["loss"])
    return row


def best_epochs(rows: Sequence[Dict]) -> Dict[str, int]:
    """The epoch each measure would pick (the first of ties, as checkpoint selection keeps it)."""
    return {key: max(rows, key=lambda r: (r[key], -r["epoch"]))["epoch"] for key in METRICS}


def agreement_with_map(rows: Sequence[Dict]) -> Dict[str, Dict]:
    """How each other measure ranks the validations against MAP's ranking (Spearman, Kendall)."""
    from nbest_eval.analysis.agreement import agreement

    return {key: agreement([r["map"] for r in rows], [r[key] for r in rows], ["spearman", "kendall"])
            for key in METRICS if key != "map"}


def table(rows: Sequence[Dict]) -> str:
    lines = ["epoch   map     bleu_1x1  bleu_100x100  wf1     gen_s   score_s"]
    lines += [f"{r['epoch']:>5}   {r['map']:.4f}  {r['bleu_1x1']:8.2f}  {r['bleu_100x100']:12.2f}  {r['wf1']:.4f}"
              f"  {r['gen_seconds']:6.2f}  {r['score_seconds']:6.2f}" for r in rows]
    return "\n".join(lines)


def plot(rows: Sequence[Dict], out: Path, title: str) -> None:
    """``curves.png`` (MAP, wF1) and ``bleu-curves.png`` per epoch, as the demo draws them."""
    from nbest_eval.analysis import plots

    epochs = [r["epoch"] for r in rows]
    for name, keys, ylabel in (("curves.png", ("map", "wf1"), "value"),
                               ("bleu-curves.png", ("bleu_1x1", "bleu_100x100"), "BLEU")):
        plots.line_plot(epochs, {k: [r[k] for r in rows] for k in keys}, out / name, title=title,
                        xlabel="epoch", ylabel=ylabel)


def prepare_out(path: str) -> Path:
    out = Path(path).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("exists and is not an empty directory; choose another --out", str(out))
    out.mkdir(parents=True, exist_ok=True)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its threads
    from nbest_eval.formats import read_gold

    start = time.time()
    try:
        gold = read_gold(args.gold)
        train, valid = split_prompts(gold, args.valid_prompts, args.train_prompts)
        out = prepare_out(args.out)
    except (InputError, OSError) as err:
        print(f"staple_en_pt.py: error: {err}", file=sys.stderr)
        return 2
    pairs = sample_pairs(train, args.samples_per_prompt, args.seed)
    write_corpus(out / "data", pairs, valid)
    model = train_sentencepiece(train, out / "spm", args.vocab_size)
    print(f"{len(train)} training prompts ({len(pairs)} sampled pairs), {len(valid)} held out; "
          f"SentencePiece model {model}", flush=True)
    rows = run_fairseq(args, out, model) if args.framework == "fairseq" else run_hf(args, out, model, len(pairs))
    seconds = time.time() - start
    summary = {"framework": args.framework, "gold": str(Path(args.gold).resolve()), "seed": args.seed,
               "epochs": args.epochs, "train_prompts": len(train), "valid_prompts": len(valid),
               "train_pairs": len(pairs), "vocab_size": args.vocab_size, "beam": args.beam,
               "valid_gold": str(out / "data" / "valid.gold.txt"), "validations": rows,
               "best_epoch": best_epochs(rows) if rows else {}, "agreement_with_map": agreement_with_map(rows),
               "seconds": round(seconds, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if rows:
        plot(rows, out, f"STAPLE en->pt, {len(valid)} held-out prompts ({args.framework})")
    print(table(rows))
    print(f"best epoch by measure: {summary['best_epoch']}; {seconds:.0f} s; {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
