"""The corpus of one run: the STAPLE release's files read and checked, the training pairs and the
validation prompts (``--split train`` or ``dev``), written out, and a SentencePiece model on them."""

from __future__ import annotations

import argparse
import hashlib
import random
import string
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from nbest_eval.data import Gold, GoldPrompt, InputError, NBest, prompt_id
from nbest_eval.formats.common import join_lines

from .settings import DEV_AWS, DEV_GOLD, SPECIALS, TRAIN_AWS, TRAIN_TOP

SPLIT_SALT = "staple-en-pt-split"  # the split depends on this and the prompt ids only, never on --seed


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


def load(args: argparse.Namespace) -> Tuple[Gold, Corpus]:
    """The dev gold and the run's corpus; every input checked before OUT is made."""
    from nbest_eval.formats import read_gold

    gold = read_gold(str(require(args.data, DEV_GOLD)))
    require(args.data, DEV_AWS)
    if args.split == "train":
        return gold, real_corpus(args.data, gold, args.train_prompts, args.valid_prompts)
    return gold, dev_corpus(gold, args.train_prompts, args.valid_prompts, args.samples_per_prompt, args.seed)


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
