#!/usr/bin/env python
"""n-best validation on real language: STAPLE en->pt, trained and validated end to end.

    python scripts/staple_en_pt.py --out ../runs/staple-fairseq --framework fairseq [--epochs N] [--seed S]
    python scripts/staple_en_pt.py --out ../runs/staple-hf --framework hf
    python scripts/staple_en_pt.py --out ../runs/dev-split --framework fairseq --split dev   # the 400/100 mode

--data is the STAPLE en_pt directory (default: $NBEST_EVAL_STAPLE_DIR, else ../shared/data/staple/en_pt
beside the repository), holding the release's files under their own names.

--split train (default): the 4,000 STAPLE training prompts, each with its most frequent learner
translation and the AWS translation (lowercased; 6,496 distinct pairs), validated on all 500 dev
prompts against the full weighted dev gold, matched by STAPLE id. --split dev: a fixed split of the
dev gold into 400 training prompts (pairs sampled by the learner-frequency weights) and 100 held out.

Then a SentencePiece unigram model on the training sentences, and fairseq-train with the
``translation_nbest`` plugin (``--nbest-remove-bpe sentencepiece``) or the Hugging Face example
(``NBestEvalCallback``, the SentencePiece model as tokenizer; ``--hf-recipe fairseq``: fairseq's model
and training recipe, read from configs/staple_transformer.args, as a Marian model; ``t5``: the first
recipe, a T5 that barely learns, kept for comparison), validated at every epoch. Everything a later
analysis needs stays in OUT: every epoch's checkpoint, every validation's n-best list, the
validation gold, the fairseq data-bin. OUT/summary.json has one row per
validation (the logged measures, the loss, timings, the list and checkpoint paths), the AWS 1-best
baseline scored on the same prompts, and the ``selection`` section (:func:`analyse`): the epoch each
measure peaks at, where ``--patience`` 3, 5 and 10 would stop and what they would keep, each pick
scored by every measure. Plots: curves.png, bleu-curves.png, loss.png.

OUT must not exist yet (or be empty): nothing is replaced. The data is not part of the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import re
import shlex
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "examples"), str(REPO)]  # the examples' building blocks; nbest_eval in a checkout

from nbest_eval.data import Gold, GoldPrompt, InputError, NBest, prompt_id  # noqa: E402
from nbest_eval.formats.common import join_lines  # noqa: E402
from nbest_eval.significance import DEFAULT_ALPHA, DEFAULT_SEED, resamples_for  # noqa: E402
from nbest_eval.training.early_stopping import DEFAULT_RULE, RULES, EarlyStopping  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("NBEST_EVAL_STAPLE_DIR", REPO.parent / "shared" / "data" / "staple" / "en_pt"))
DEV_GOLD, DEV_AWS = "dev.en_pt.2020-02-20.gold.txt", "dev.en_pt.aws_baseline.pred.txt"
TRAIN_TOP, TRAIN_AWS = "train.en_pt.top_translation.txt", "train.en_pt.aws_baseline.pred.txt"
METRICS = ("map", "bleu_1x1", "bleu_100x100", "wf1", "p1")
#: the measures a checkpoint can be selected by, and whether higher is better
SELECTION = {"map": True, "bleu_1x1": True, "bleu_100x100": True, "wf1": True, "loss": False}
PATIENCE = (3, 5, 10)
#: --hf-recipe t5, the first Hugging Face recipe, kept for comparison: a T5 at the fairseq model's
#: dimensions without dropout or label smoothing, lr 3e-3 constant after 100 warm-up steps, 64 pairs a batch
T5_RECIPE = dict(model="t5", d_model=128, layers=3, heads=4, ffn=256, batch_size=64, max_new_tokens=48)
#: fairseq's --max-tokens 2000 makes batches of 138 training pairs on average on this data (train_bsz in its log)
FAIRSEQ_BATCH_PAIRS = 138
HF_RECIPES = ("fairseq", "t5")
DEFAULT_EPOCHS = {"fairseq": 60, "hf": 30}
SPLIT_SALT = "staple-en-pt-split"  # the split depends on this and the prompt ids only, never on --seed
SPECIALS = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}  # the Hugging Face example's ids
SPLIT_SIZES = {"train": (None, None), "dev": (400, 100)}  # (training, validation prompts); None: all


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="staple_en_pt.py", description=__doc__,
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
    p.add_argument("--average", type=int, default=5, metavar="K",
                   help="average the K best checkpoints by MAP, and the last K (default: %(default)s)")
    args = p.parse_args(argv)
    if args.average < 1:
        p.error("--average must be at least 1")
    if args.analyse:
        return args
    if args.framework is None:
        p.error("the following arguments are required: --framework (unless --analyse)")
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


# -- data ---------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """What one run trains and validates on."""

    pairs: List[Tuple[str, str]]  # (English prompt, Portuguese translation), training order
    train_prompts: int
    valid: Gold                   # the validation prompts with their full weighted gold
    sentences: List[str]          # what the SentencePiece model is trained on


def require(data: Path, name: str) -> Path:
    """``data/name``, or an error naming the missing file."""
    path = data / name
    if not path.is_file():
        raise InputError("missing: a file of the STAPLE en_pt release is needed here (see --data)", str(path))
    return path


def salted_order(gold: Gold) -> List[GoldPrompt]:
    """The gold's prompts in a fixed pseudo-random order: a salted hash of their ids."""
    return sorted(gold, key=lambda p: hashlib.sha256(f"{SPLIT_SALT}:{p.id}".encode()).hexdigest())


def split_prompts(gold: Gold, n_valid: int, n_train: int) -> Tuple[Gold, Gold]:
    """(training, held-out) prompts: the first ``n_valid`` of :func:`salted_order` held out, the next
    ``n_train`` for training. Fixed for a given gold."""
    if n_valid + n_train > len(gold):
        raise InputError(f"{n_valid} held-out + {n_train} training prompts asked, the gold has {len(gold)}",
                         gold.path)
    order = salted_order(gold)
    return Gold(order[n_valid:n_valid + n_train], gold.path), Gold(order[:n_valid], gold.path)


def dev_prompts(gold: Gold, n: Optional[int]) -> Gold:
    """The first ``n`` prompts of :func:`salted_order` (all: None), in the gold's order: a subset
    that does not depend on the gold file's order, for small runs."""
    if n is None or n == len(gold):
        return gold
    if n > len(gold):
        raise InputError(f"{n} validation prompts asked, the gold has {len(gold)}", gold.path)
    chosen = {p.id for p in salted_order(gold)[:n]}
    return Gold([p for p in gold if p.id in chosen], gold.path)


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


def read_top_translations(path: Path) -> Gold:
    """``<english prompt>|<most frequent learner translation>`` lines as a Gold (weight 1 each), keyed by
    STAPLE id, so that the AWS prediction file of the same prompts reads against it, ids checked."""
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        prompt, bar, translation = line.partition("|")
        if not (bar and prompt.strip() and translation.strip()):
            raise InputError("expected '<english prompt>|<translation>'", str(path), number)
        prompts.append(GoldPrompt(prompt_id(prompt), prompt, ((translation, 1.0),)))
    if not prompts:
        raise InputError("no training prompt", str(path))
    return Gold(prompts, str(path))


def training_pairs(top: Gold, aws: NBest, aws_path: str) -> List[Tuple[str, str]]:
    """Per prompt, in order: (prompt, its learner translation) and (prompt, the AWS translation),
    lowercased (the gold is), a pair that is already there dropped."""
    pairs = []
    for prompt in top:
        if not aws.get(prompt.id):
            raise InputError(f"no translation of the training prompt {prompt.text!r} ({prompt.id})", aws_path)
        pairs += [(prompt.text, prompt.translations[0][0].lower()), (prompt.text, aws[prompt.id][0].text.lower())]
    return list(dict.fromkeys(pairs))


def real_corpus(data: Path, gold: Gold, n_train: Optional[int], n_valid: Optional[int]) -> Corpus:
    """--split train: the STAPLE training prompts (the first ``n_train`` of the release's order),
    validated on :func:`dev_prompts`."""
    from nbest_eval.formats import read_nbest

    top = read_top_translations(require(data, TRAIN_TOP))
    aws_path = str(require(data, TRAIN_AWS))
    aws = read_nbest(aws_path, top, "staple")
    if n_train is not None:
        if n_train > len(top):
            raise InputError(f"{n_train} training prompts asked, the file has {len(top)}", top.path)
        top = Gold(top.prompts[:n_train], top.path)
    pairs = training_pairs(top, aws, aws_path)
    sentences = sorted({p.text for p in top} | {t for _, t in pairs})
    return Corpus(pairs, len(top), dev_prompts(gold, n_valid), sentences)


def dev_corpus(gold: Gold, n_train: int, n_valid: int, per_prompt: int, seed: int) -> Corpus:
    """--split dev: :func:`split_prompts`, pairs sampled by weight; SentencePiece on the training prompts
    and all their translations (distinct sentences, so that the sampling does not skew the pieces)."""
    train, valid = split_prompts(gold, n_valid, n_train)
    sentences = sorted({p.text for p in train} | {t for p in train for t, _ in p.translations})
    return Corpus(sample_pairs(train, per_prompt, seed), len(train), valid, sentences)


def write_lines(path: Path, lines: Sequence[str]) -> None:
    path.write_text(join_lines(lines), encoding="utf-8")


def write_corpus(data: Path, corpus: Corpus) -> None:
    """``data/{train,valid}.{src,tgt}`` in raw text (valid.tgt: each prompt's most frequent
    translation, for the loss) and ``data/valid.gold.txt``, the validation prompts' gold."""
    from nbest_eval.formats import write_gold

    data.mkdir(parents=True)
    write_lines(data / "train.src", [s for s, _ in corpus.pairs])
    write_lines(data / "train.tgt", [t for _, t in corpus.pairs])
    write_lines(data / "valid.src", [p.text for p in corpus.valid])
    write_lines(data / "valid.tgt", [p.translations[0][0] for p in corpus.valid])
    write_gold(corpus.valid, data / "valid.gold.txt")


def train_sentencepiece(sentences: Sequence[str], prefix: Path, vocab_size: int) -> Path:
    """A unigram model; no normalization, so decoding restores the text exactly; every printable
    ASCII character a piece, so that a validation prompt with a character the training sentences
    lack (a digit) still decodes to itself."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=str(prefix), vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, normalization_rule_name="identity",
        required_chars=string.ascii_letters + string.digits + string.punctuation,
        hard_vocab_limit=False, pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", unk_piece="<unk>",
        minloglevel=2, **SPECIALS)
    return prefix.with_suffix(".model")


def score_baseline(path: Path, gold: Gold, valid: Gold) -> Dict:
    """The AWS 1-best file scored on the validation prompts with the validation measures, with their
    95% bootstrap intervals over prompts."""
    from nbest_eval import Scorer
    from nbest_eval.formats import read_nbest
    from nbest_eval.significance import PerPrompt, confidence_intervals

    lists = read_nbest(str(path), gold, "staple")
    scorer = Scorer(METRICS)
    scored = scorer.score(valid, {pid: hyps for pid, hyps in lists.items() if pid in valid}, keep_per_prompt=True)
    return {"file": str(path.resolve()), "n_prompts": scored.n_prompts, "n_empty": scored.n_empty,
            **scored.values, "ci": intervals_json(confidence_intervals(PerPrompt(scorer, scored.per_prompt)))}


# -- fairseq ------------------------------------------------------------------------------------


def run_fairseq(args: argparse.Namespace, out: Path, model: Path) -> List[Dict]:
    import sentencepiece as spm
    from fairseq_demo import run, tool

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
    run([tool("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--srcdict", str(encoded / "dict.txt"),
         "--trainpref", str(encoded / "train"), "--validpref", str(encoded / "valid"),
         "--destdir", str(out / "fairseq" / "data-bin"), "--workers", "1"], out / "fairseq" / "preprocess.log")
    config = shlex.split((REPO / "configs" / "staple_transformer.args").read_text(), comments=True)
    log, checkpoints = out / "fairseq" / "train.log", out / "fairseq" / "checkpoints"
    run([tool("fairseq-train"), str(out / "fairseq" / "data-bin"), "--user-dir", USER_DIR, *config,
         "--nbest-gold", str(out / "data" / "valid.gold.txt"), "--nbest-remove-bpe", "sentencepiece",
         "--nbest-beam", str(args.beam), "--nbest-metrics", ",".join(METRICS), "--nbest-save-dir", str(out / "nbest"),
         "--save-dir", str(checkpoints), "--max-epoch", str(args.epochs), "--seed", str(args.seed),
         *(["--patience", str(args.patience), "--nbest-stopping", args.stopping] if args.patience else [])], log)
    return fairseq_rows(out)


def fairseq_rows(out: Path) -> List[Dict]:
    """summary.json's validations of a fairseq run in ``out``: its log's valid lines, its saved lists."""
    from fairseq_demo import valid_lines

    records = [json.loads(path.read_text()) for path in (out / "nbest").glob("*.json")]  # one a saved list
    saved = {(r["epoch"], r["num_updates"]): out / "nbest" / r["nbest"] for r in records}
    rows = []
    for line in valid_lines(out / "fairseq" / "train.log"):
        epoch, step = int(line["epoch"]), int(line["num_updates"])
        rows.append(validation(line, epoch=epoch, step=step, nbest=saved[(epoch, step)],
                               checkpoint=out / "fairseq" / "checkpoints" / f"checkpoint{epoch}.pt"))
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


def fairseq_config() -> Dict[str, str]:
    """configs/staple_transformer.args as {option: value} (a flag's value: "")."""
    words = shlex.split((REPO / "configs" / "staple_transformer.args").read_text(), comments=True)
    options: Dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            following = words[i + 1] if i + 1 < len(words) else "--"
            options[word] = "" if following.startswith("--") else following
    return options


def hf_recipe(name: str) -> Dict:
    """DemoConfig's model, optimization and generation fields for ``--hf-recipe``. ``fairseq``: the
    fairseq run's own settings, read from its configuration: its architecture at its dimensions
    (:func:`hf_models.build_fairseq_twin`), dropout, label smoothing, Adam betas, gradient clipping,
    inverse-sqrt schedule with its warm-up, batches of similar lengths holding as many pairs as
    fairseq's on average; n-best lists with its length bound, a prompt done once it has a beam of
    finished hypotheses (fairseq's beam search), 64 prompts a generate call (on 2 CPU cores as fast as
    32, where 128 and 256 were slower)."""
    if name == "t5":
        return dict(T5_RECIPE)
    c = fairseq_config()
    if c["--arch"] != "transformer" or c["--lr-scheduler"] != "inverse_sqrt" or "--share-all-embeddings" not in c:
        raise InputError("the Hugging Face twin is of a transformer with shared embeddings trained with an "
                         "inverse_sqrt schedule", str(REPO / "configs" / "staple_transformer.args"))
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
    from hf_toy import DemoConfig

    return {**dataclasses.asdict(DemoConfig("")), **hf_recipe(name)}


def run_hf(args: argparse.Namespace, out: Path, model: Path, n_pairs: int) -> List[Dict]:
    """Every evaluation's checkpoint is kept (the model alone: what selection and averaging need)."""
    from hf_toy import DemoConfig, make_trainer

    recipe = hf_recipe(args.hf_recipe)
    steps_per_epoch = -(-n_pairs // recipe["batch_size"])
    config = DemoConfig(output_dir=str(out / "hf"), data=str(out / "data"), max_steps=args.epochs * steps_per_epoch,
                        eval_steps=steps_per_epoch, patience=args.patience or args.epochs,
                        stopping=args.stopping if args.patience else None, seed=args.seed, num_beams=args.beam,
                        metrics=METRICS, save_format="tsv", save_total_limit=None, **recipe)
    trainer = make_trainer(config, tokenizer=spm_tokenizer(model), save_only_model=True)
    trainer.train()
    return hf_rows(out, trainer.state.log_history)


def hf_rows(out: Path, log_history: Sequence[Dict]) -> List[Dict]:
    """summary.json's validations of a Hugging Face run in ``out``: the Trainer's log, the saved lists."""
    saved = {int(re.search(r"step(\d+)", p.name).group(1)): p for p in (out / "hf" / "nbest").glob("nbest-step*")}
    rows = []
    for entry in log_history:
        if "eval_map" in entry:
            line = {k.removeprefix("eval_"): v for k, v in entry.items()}
            rows.append(validation(line, epoch=round(entry["epoch"]), step=entry["step"], nbest=saved[entry["step"]],
                                   checkpoint=out / "hf" / f"checkpoint-{entry['step']}"))
    return rows


# -- summary and selection ----------------------------------------------------------------------


def validation(line: Dict, *, epoch: int, step: int, nbest: Path, checkpoint: Path) -> Dict:
    """One validation's row of summary.json, from a logged line with the ``eval_``/``valid_`` prefix removed."""
    row = {"epoch": epoch, "step": step, **{k: float(line[k]) for k in METRICS},
           "n_prompts": int(line["nbest_prompts"]), "gen_seconds": float(line["nbest_gen_s"]),
           "score_seconds": float(line["nbest_score_s"]), "overhead_seconds": float(line["nbest_overhead_s"]),
           "nbest": str(nbest), "checkpoint": str(checkpoint)}
    for key in ("loss", "nll_loss", "wall"):
        if key in line:
            row[key] = float(line[key])
    kept = line.get("nbest_kept_update", line.get("nbest_kept_step"))  # with in-loop early stopping
    if kept is not None:
        row["kept_step"] = int(float(kept))
    return row


def in_loop_stopping(rows: Sequence[Dict], args: argparse.Namespace) -> Optional[Dict]:
    """With --patience: the rule the run trained with, the epoch after which it stopped (None: it
    trained every epoch) and the epoch whose checkpoint it kept, from the logged kept step."""
    if not args.patience or not rows:
        return None
    kept = next((row["epoch"] for row in rows if row["step"] == rows[-1].get("kept_step")), None)
    return {"rule": args.stopping, "patience": args.patience, "metric": "map",
            "stopped_after": rows[-1]["epoch"] if len(rows) < args.epochs else None, "kept": kept}


def pick(rows: Sequence[Dict], values: Sequence[Dict], index: Optional[int]) -> Optional[Dict]:
    """A validation as a selection result: its epoch and step and every measure's value there."""
    if index is None:
        return None
    return {"epoch": rows[index]["epoch"], "step": rows[index]["step"], "checkpoint": rows[index]["checkpoint"],
            "values": values[index]}


def analyse(out: Path, rows: Sequence[Dict], gold: Gold, patience: Sequence[int] = PATIENCE,
            generation: Optional[Dict] = None) -> Dict:
    """summary.json's ``selection`` section, from the saved lists (and the logged loss): for each
    measure of :data:`SELECTION`, the validation it peaks at and where fairseq's ``--patience P``
    (the strict rule) would stop on this curve and what it would keep, each scored by every
    measure; every early-stopping rule on MAP replayed at each ``patience`` (``stopping``: where it
    stops, what it keeps, that checkpoint's MAP and BLEU 100x100 with intervals and p-values against
    their bests, the share of epochs it saves); per validation, every measure's 95% bootstrap
    interval, its Holm-corrected p-value against that measure's best and whether it is tied with it
    (paired bootstrap over prompts); with ``generation`` (how the run generated), the average of the
    best and of the last checkpoints against the best single one (:func:`averages`). Written to
    ``out/selection.txt`` as a table too.

    Works on a finished run: ``--analyse OUT``."""
    from nbest_eval.selection import best_index, choose, systems_of_files

    systems = systems_of_files(gold, [row["nbest"] for row in rows], METRICS)
    choices = {key: choose(systems, key) for key in METRICS}
    values = [{**{k: choices[k].values[i] for k in METRICS},  # re-scored; the loss as logged
               **{k: row[k] for k in SELECTION if k in row and k not in METRICS}} for i, row in enumerate(rows)]
    epochs = [row["epoch"] for row in rows]
    measures = {}
    for key, maximize in SELECTION.items():
        curve = [v.get(key) for v in values]
        if all(v is None for v in curve):
            continue
        replays = {p: EarlyStopping(key, "strict", p, maximize).replay(curve) for p in patience}
        measures[key] = {
            "maximize": maximize, "peak": pick(rows, values, best_index(curve, maximize)),
            # the loss has no per-prompt statistics here: what it picks has no tied set of its own
            "tied_epochs": [epochs[i] for i in choices[key].tied] if key in choices else None,
            "patience": {str(p): {"stopped_at_epoch": None if stop is None else rows[stop]["epoch"],
                                  "keeps": pick(rows, values, decisions[-1].kept)}
                         for p, (decisions, stop) in replays.items()}}
    for result in measures.values():  # is each pick as good as what each other measure picks?
        result["peak"]["tied_with_the_best_by"] = [k for k, other in measures.items()
                                                   if other["tied_epochs"] and result["peak"]["epoch"] in
                                                   other["tied_epochs"]]
    logged_gap = max((abs(row[k] - v[k]) / max(1.0, abs(v[k])) for row, v in zip(rows, values) for k in METRICS
                      if v[k] is not None and k in row), default=0.0)
    selection = {"values_from": "the saved n-best lists re-scored against valid_gold; loss from the training log",
                 "significance": {"test": "paired bootstrap over prompts, Holm-corrected across the validations",
                                  "alpha": DEFAULT_ALPHA, "seed": DEFAULT_SEED,
                                  "n_samples": resamples_for(len(rows) - 1)},
                 "largest_relative_gap_logged_vs_rescored": logged_gap, "patience": list(patience),
                 "measures": measures, "stopping": stopping_replays(rows, systems, choices, patience),
                 "validations": [{"epoch": epochs[i], **values[i], "ci": {k: verdict_json(choices[k], i)
                                                                          for k in METRICS}}
                                 for i in range(len(rows))]}
    if generation and len(rows) >= generation["average"] and choices["map"].best is not None:
        selection["averages"] = averages(out, rows, gold, choices["map"], generation)
    (out / "selection.txt").write_text(selection_table(selection) + "\n")
    return selection


def stopping_replays(rows: Sequence[Dict], systems, choices: Dict, patience: Sequence[int]) -> List[Dict]:
    """:func:`nbest_eval.selection.replay_rules` on MAP, with epochs for indices."""
    from nbest_eval.selection import replay_rules

    replays = replay_rules(systems, choices, "map", patience=patience)
    for r in replays:
        stop, kept = r.pop("stopped_after"), r.pop("kept")
        r.update(stopped_after_epoch=None if stop is None else rows[stop]["epoch"], kept_epoch=rows[kept]["epoch"],
                 epochs_saved=r.pop("saved"))
    return replays


def verdict_json(choice, index: int) -> Optional[Dict]:
    """One validation's interval, p-value against the measure's best, and tie, for summary.json."""
    if not choice.verdicts or choice.verdicts[index].interval is None:
        return None
    verdict = choice.verdicts[index]
    return {**verdict.interval.as_dict(), "p_holm": verdict.p_holm, "tied": verdict.tied}


def averages(out: Path, rows: Sequence[Dict], gold: Gold, by_map, generation: Dict) -> Dict:
    """The parameters of the K (``generation["average"]``) best checkpoints by MAP averaged, and of
    the last K (fairseq's scripts/average_checkpoints.py habit), each generated as the run validated
    and tested (paired bootstrap, every measure) against the best single checkpoint by MAP, and
    against each other."""
    from nbest_eval import Scorer
    from nbest_eval.formats import read_nbest, write_nbest
    from nbest_eval.selection.averaging import best_k
    from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

    framework, k = generation["framework"], generation["average"]
    if framework == "hf":
        from nbest_eval.hf import checkpoint_nbest
        from nbest_eval.hf.averaging import average_checkpoints
    else:
        from nbest_eval.fairseq.averaging import average_checkpoints
        from nbest_eval.fairseq.checkpoints import checkpoint_nbest
    options = {name: v for name, v in generation.items() if name not in ("framework", "average")}
    scorer = Scorer(METRICS)

    def system(nbest, name):
        return PerPrompt(scorer, scorer.score(gold, nbest, keep_per_prompt=True).per_prompt, name)

    checkpoints = [row["checkpoint"] for row in rows]
    best = by_map.best
    single = system(read_nbest(rows[best]["nbest"], gold, "tsv"), f"epoch {rows[best]['epoch']}")
    chosen = {f"best{k}_by_map": best_k(checkpoints, by_map.values, k), f"last{k}": checkpoints[-k:]}
    report, averaged = {}, []
    for name, paths in chosen.items():  # each average generated as the run validated, scored like a checkpoint
        target = out / framework / (f"average-{name}" + ("" if framework == "hf" else ".pt"))
        if not os.path.exists(target):  # a re-analysis reuses the run's own average
            average_checkpoints(paths, target)
        nbest = checkpoint_nbest(str(target), gold, **options)
        lists = target.with_name(target.name.removesuffix(".pt") + ".tsv")  # beside the average
        write_nbest(nbest, lists, "tsv", overwrite=True)
        averaged.append(system(nbest, name))
        report[name] = {"epochs": [rows[checkpoints.index(p)]["epoch"] for p in paths], "path": str(target),
                        "nbest": str(lists)}
    against_single = paired_test(single, averaged, "bs", keys=METRICS)
    against_last = paired_test(averaged[1], averaged[:1], "bs", keys=METRICS)
    report["best_single"] = {"epoch": rows[best]["epoch"], "values": single.scores(),
                             "ci": intervals_json(confidence_intervals(single))}
    for name, results in against_single.items():
        report[name].update(values={k: r.score for k, r in results.items()},
                            ci=intervals_json({k: r.interval for k, r in results.items()}),
                            p_vs_best_single={k: r.p_value for k, r in results.items()})
    report[averaged[0].name]["p_vs_last"] = {k: r.p_value for k, r in against_last[averaged[0].name].items()}
    return report


def intervals_json(intervals: Dict) -> Dict:
    return {k: None if ci is None else ci.as_dict() for k, ci in intervals.items()}


def selection_table(selection: Dict) -> str:
    """Per measure: its peak and each patience's stop and pick, every pick scored by all measures;
    the epochs tied with each peak; the averages against the best single checkpoint."""
    keys = [*METRICS, "loss"]
    lines = ["picked by     how                  epoch  " + "  ".join(f"{k:>12}" for k in keys)]
    for key, result in selection["measures"].items():
        choices = [("peak", result["peak"])]
        for p, replay in result["patience"].items():
            stop = replay["stopped_at_epoch"]
            choices.append((f"patience {p}, " + (f"stop {stop}" if stop is not None else "no stop"), replay["keeps"]))
        for how, chosen in choices:
            cells = "  ".join(_cell(chosen["values"].get(k)) for k in keys)
            lines.append(f"{key:<13} {how:<20} {chosen['epoch']:>5}  {cells}")
    test = selection["significance"]
    lines += ["", f"tied with each measure's peak ({test['test']}, {test['n_samples']} resamples, p >= "
                  f"{test['alpha']}), and which measures' tied sets hold each peak:"]
    for key, result in selection["measures"].items():
        tied = _epochs(result["tied_epochs"]) if result["tied_epochs"] is not None else "n/a (no per-prompt loss)"
        lines.append(f"{key:<13} peak {result['peak']['epoch']:>3}: tied {tied}; "
                     f"as good as the best by: {', '.join(result['peak']['tied_with_the_best_by']) or 'none'}")
    if selection.get("stopping"):
        lines += ["", "early stopping on MAP replayed (each rule as training decides; p: against the measure's best)",
                  "rule          P  stops after  keeps  saved   MAP [95% CI]                 p     "
                  "BLEU 100x100 [95% CI]       p"]
        for r in selection["stopping"]:
            stop = r["stopped_after_epoch"]
            cells = "  ".join(f"{_with_ci(r[k])}  {r[k]['p_vs_best']:.3f}" for k in ("map", "bleu_100x100"))
            lines.append(f"{r['rule']:<12} {r['patience']:>2}  {'never' if stop is None else stop:>11}  "
                         f"{r['kept_epoch']:>5}  {r['epochs_saved']:>4.0%}   {cells}")
    if "averages" in selection:
        lines += ["", "averaged checkpoints (paired bootstrap p-value against the best single checkpoint by map)",
                  "system             epochs          " + "  ".join(f"{k:>18}" for k in METRICS)]
        for name, result in selection["averages"].items():
            epochs = _epochs(result.get("epochs", [result.get("epoch")]))
            p = result.get("p_vs_best_single", {})
            cells = "  ".join(f"{result['values'][k]:10.4f}" + (f" p={p[k]:.3f}" if k in p else " " * 8)
                              for k in METRICS)
            lines.append(f"{name:<18} {epochs:<15} {cells}")
    return "\n".join(lines)


def _epochs(epochs: Sequence[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    runs: List[List[int]] = []
    for epoch in sorted(epochs):
        if runs and epoch == runs[-1][-1] + 1:
            runs[-1].append(epoch)
        else:
            runs.append([epoch])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


def _with_ci(entry: Dict) -> str:
    ci = entry["ci"]
    return f"{entry['value']:8.4f} [{ci['low']:.4f}, {ci['high']:.4f}]" if ci else f"{entry['value']:8.4f}" + " " * 18


def _cell(value: Optional[float]) -> str:
    return f"{'n/a':>12}" if value is None else f"{value:12.4f}"


def agreement_with_map(rows: Sequence[Dict]) -> Dict[str, Dict]:
    """How each other measure ranks the validations against MAP's ranking (Spearman, Kendall); the
    loss negated, so that higher is better for all."""
    from nbest_eval.analysis.agreement import agreement

    others = {k: [r[k] for r in rows] for k in METRICS if k != "map"}
    if all("loss" in r for r in rows):
        others["neg_loss"] = [-r["loss"] for r in rows]
    return {key: agreement([r["map"] for r in rows], ys, ["spearman", "kendall"]) for key, ys in others.items()}


def table(rows: Sequence[Dict], baseline: Optional[Dict] = None) -> str:
    keys = [*METRICS, "loss"]
    lines = ["epoch  " + "  ".join(f"{k:>12}" for k in keys) + "   gen_s  score_s"]
    lines += [f"{r['epoch']:>5}  " + "  ".join(_cell(r.get(k)) for k in keys)
              + f"  {r['gen_seconds']:6.2f}  {r['score_seconds']:6.2f}" for r in rows]
    if baseline:
        lines.append("  AWS  " + "  ".join(_cell(baseline.get(k)) for k in keys))
    return "\n".join(lines)


def plot(selection: Dict, out: Path, title: str, overwrite: bool = False) -> None:
    """``map.png``, ``curves.png`` (wF1, P@1), ``bleu-curves.png`` and ``loss.png`` per epoch (MAP
    alone: its scale is a tenth of the others'): each measure's 95% interval as a band, the epochs
    tied with its best circled."""
    from nbest_eval.analysis import plots

    rows = selection["validations"]
    epochs = [r["epoch"] for r in rows]
    for name, keys, ylabel in (("map.png", ("map",), "MAP"), ("curves.png", ("wf1", "p1"), "value"),
                               ("bleu-curves.png", ("bleu_1x1", "bleu_100x100"), "BLEU"),
                               ("loss.png", ("loss",), "validation loss")):
        judged = [k for k in keys if all(r.get("ci", {}).get(k) for r in rows)]
        plots.line_plot(epochs, {k: [r.get(k) for r in rows] for k in keys}, out / name, xlabel="epoch",
                        ylabel=ylabel, overwrite=overwrite,
                        title=title + ("\n(band: 95% CI; circled: tied with the best)" if judged else ""),
                        bands={k: ([r["ci"][k]["low"] for r in rows], [r["ci"][k]["high"] for r in rows])
                               for k in judged},
                        rings={k: [r["ci"][k]["tied"] for r in rows] for k in judged})


def prepare_out(path: str) -> Path:
    out = Path(path).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("exists and is not an empty directory; choose another --out", str(out))
    out.mkdir(parents=True, exist_ok=True)
    return out


def load(args: argparse.Namespace) -> Tuple[Gold, Corpus]:
    """The dev gold and the run's corpus; every input checked before OUT is made."""
    from nbest_eval.formats import read_gold

    gold = read_gold(str(require(args.data, DEV_GOLD)))
    require(args.data, DEV_AWS)
    if args.split == "train":
        return gold, real_corpus(args.data, gold, args.train_prompts, args.valid_prompts)
    return gold, dev_corpus(gold, args.train_prompts, args.valid_prompts, args.samples_per_prompt, args.seed)


def generation(summary: Dict, out: Path, average: int) -> Dict:
    """How the run generated its validation lists, for generating from averaged checkpoints alike,
    and how many checkpoints to average (``summary``: the run's summary.json)."""
    framework, beam = summary["framework"], summary["beam"]
    if framework == "hf":  # the callback's evaluation batches, so the lists are the ones it scores
        recipe = recipe_settings(summary.get("hf_recipe", "t5"))
        length = (0.0, recipe["max_new_tokens"]) if recipe["max_new_tokens"] else (recipe["max_len_a"],
                                                                                    recipe["max_len_b"])
        return {"framework": "hf", "average": average, "beam": beam, "max_len_a": length[0], "max_len_b": length[1],
                "batch_size": recipe["eval_batch_size"], "generation_kwargs": recipe["generation_kwargs"]}
    config = fairseq_config()
    return {"framework": "fairseq", "average": average, "beam": beam, "data": str(out / "fairseq" / "data-bin"),
            "remove_bpe": "sentencepiece", "max_len_a": float(config["--nbest-max-len-a"]),
            "max_len_b": int(config["--nbest-max-len-b"])}


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
    print(table(summary["validations"], summary["baseline"]))
    print((out / "selection.txt").read_text() if summary["validations"] else "no validation")
    stopping = summary.get("early_stopping")
    if stopping:
        print(f"trained with early stopping ({stopping['rule']} on {stopping['metric']}, patience "
              f"{stopping['patience']}): " + (f"stopped after epoch {stopping['stopped_after']}"
                                              if stopping["stopped_after"] else "no stop") +
              f", kept epoch {stopping['kept']}")
    print(f"{summary.get('seconds', summary['train_seconds']):.0f} s; {out / 'summary.json'}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its threads
    if args.analyse:
        return reanalyse(args)
    start = time.time()
    try:
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
    if args.framework == "fairseq":
        rows = run_fairseq(args, out, model)
    else:
        rows = run_hf(args, out, model, len(corpus.pairs))
    train_seconds = time.time() - start
    valid_gold = out / "data" / "valid.gold.txt"
    summary = {"framework": args.framework, "split": args.split, "data": str(args.data.resolve()),
               "seed": args.seed, "epochs": args.epochs, "train_prompts": corpus.train_prompts,
               "early_stopping": in_loop_stopping(rows, args),
               "train_pairs": len(corpus.pairs), "valid_prompts": len(corpus.valid), "vocab_size": args.vocab_size,
               "beam": args.beam, "hf_recipe": args.hf_recipe if args.framework == "hf" else None,
               "metrics": list(METRICS), "valid_gold": str(valid_gold),
               "data_bin": str(out / "fairseq" / "data-bin") if args.framework == "fairseq" else None,
               "sentencepiece": str(model), "validations": rows, "baseline": baseline, "selection": {},
               "agreement_with_map": agreement_with_map(rows), "train_seconds": round(train_seconds, 1)}
    # written before the analysis too: a run whose analysis fails is still one that --analyse can finish
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if rows:
        summary["selection"] = analyse(out, rows, corpus.valid, generation=generation(summary, out, args.average))
    summary["seconds"] = round(time.time() - start, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if rows:
        plot(summary["selection"], out, title(summary))
    report(out, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
