"""A synthetic corpus with many weighted valid translations per source, for the demo and the tests.

A tiny transformer learns it on a CPU in minutes, and every source sentence has a *known* complete
gold set, so n-best metrics can be checked against the truth rather than against a sample of it.

Source grammar (lowercase English; when sampling, each rule's alternatives are equally likely)::

    S    -> SUBJ VERB OBJ | SUBJ VERB OBJ PREP the PLACE | SUBJ VERB OBJ ADV
    SUBJ -> PRON | DET NOUN | DET ADJ NOUN
    OBJ  -> DET NOUN | DET ADJ NOUN

Target language (made up), from a parse of the source; every choice lists its options most
preferred first::

    clause  SUBJ OBJ [ko] VERB (SOV)  or  SUBJ VERB OBJ [ko] (SVO)
    SUBJ    a pronoun subject is kept or dropped
    NP      NOUN [ADJ], preceded by "un" for "a" ("the" has no translation)
    ko      the object marker is present or absent
    VERB    bare, or with the past suffix "-ta"
    tail    PLACE PREP (a postposition) after the clause; ADV after the clause or before it
    words   each source word has one to three target synonyms (:data:`LEXICON`)

A translation's weight is the product of the Zipf probabilities of its choices (the option of rank
r among n has probability (1/r) / (1 + 1/2 + ... + 1/n)), summed over the choices that spell the
same string (a dropped pronoun hides its synonym choice).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

from ..data import Gold, GoldPrompt, InputError, prompt_id
from ..files.output import make_folder, write_files
from ..files.writable import check_empty_folder
from ..formats.staple import format_gold

#: Source word -> its target synonyms, most preferred first, by part of speech.
LEXICON: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "PRON": {"i": ("mi",), "you": ("tu", "vu"), "he": ("li",), "she": ("si",), "we": ("nu",),
             "they": ("ili",)},
    "NOUN": {"cat": ("miro", "feli"), "dog": ("vaku", "hundo", "kani"), "bird": ("pipi", "avo"),
             "child": ("nino", "bebo"), "woman": ("sela", "dona"), "man": ("oman",),
             "fish": ("pesu", "fiso"), "horse": ("kavo", "eku"), "teacher": ("dosen", "magi"),
             "farmer": ("agri",), "king": ("rego",), "friend": ("amiko", "koro")},
    "VERB": {"saw": ("vidi", "spekti"), "ate": ("manji", "voro"), "liked": ("gusti", "ami"),
             "found": ("trovi",), "followed": ("sekvi", "pasi"), "carried": ("porti", "baru"),
             "heard": ("audi", "oreli"), "helped": ("helpi", "juti", "sokori"), "called": ("vokli",),
             "watched": ("gardi", "obsi")},
    "ADJ": {"big": ("grana", "maga"), "small": ("peti",), "tall": ("alta",), "red": ("ruga",),
            "happy": ("gaja", "feliza"), "hungry": ("fama",), "young": ("juna",), "black": ("nigra",)},
    "PREP": {"in": ("ena", "inu"), "near": ("apud",), "at": ("ce",)},
    "PLACE": {"garden": ("hortu",), "river": ("rivo",), "house": ("domo", "kasa"),
              "market": ("merka",), "forest": ("silva",)},
    "ADV": {"today": ("hodi", "oje"), "yesterday": ("hieri",), "again": ("denove",)},
}
DETS = ("the", "a")
INDEFINITE, OBJECT_MARKER, PAST_SUFFIX = "un", "ko", "ta"

GOLD_FILE = "valid.gold.txt"
FILES = ("train.src", "train.tgt", "valid.src", "valid.tgt", GOLD_FILE, "README.txt")


# A translation model is a tree of choices and sequences that can list its whole weighted output set
# (``dist``) and draw from it (``sample``) consistently. ``dist`` gives integer weights and their
# total, so that equal probabilities compare equal (deterministic ties) and nothing is rounded until
# a weight is written.

_Dist = Tuple[Dict[str, int], int]


class _Lit:
    def __init__(self, text: str):
        self.text = text

    def dist(self) -> _Dist:
        return {self.text: 1}, 1

    def sample(self, rng: random.Random) -> str:
        return self.text


_Node = Union[_Lit, "_Choice", "_Seq"]


@cache
def _zipf(n: int) -> Tuple[int, ...]:
    """Integer weights of ranks 1..n, proportional to 1/rank."""
    common = math.lcm(*range(1, n + 1))
    return tuple(common // r for r in range(1, n + 1))


class _Choice:
    """One of ``options``, most preferred first, with Zipf probabilities."""

    def __init__(self, options: Sequence[Union[str, _Node]]):
        self.options = [_Lit(o) if isinstance(o, str) else o for o in options]
        self.zipf = _zipf(len(self.options))

    def dist(self) -> _Dist:
        dists = [option.dist() for option in self.options]
        scale = math.lcm(*(total for _, total in dists))
        out: Dict[str, int] = {}
        for zipf, (weights, total) in zip(self.zipf, dists):
            factor = zipf * (scale // total)
            for text, weight in weights.items():
                out[text] = out.get(text, 0) + factor * weight
        return out, sum(self.zipf) * scale

    def sample(self, rng: random.Random) -> str:
        return rng.choices(self.options, weights=self.zipf)[0].sample(rng)


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


class _Seq:
    """The concatenation of independent ``parts``."""

    def __init__(self, *parts: _Node):
        self.parts = parts

    def dist(self) -> _Dist:
        out, total = {"": 1}, 1
        for part in self.parts:
            weights, part_total = part.dist()
            step: Dict[str, int] = {}
            for head, w_head in out.items():
                for tail, w_tail in weights.items():
                    text = _join(head, tail)
                    step[text] = step.get(text, 0) + w_head * w_tail
            out, total = step, total * part_total
        return out, total

    def sample(self, rng: random.Random) -> str:
        return _join(*(part.sample(rng) for part in self.parts))


def _word(pos: str, word: str) -> _Choice:
    return _Choice(LEXICON[pos][word])


def _outside_grammar(source: str, why: str) -> InputError:
    return InputError(f"not a sentence of the synthetic grammar ({why}): {source!r}")


def _noun_phrase(tokens: List[str], source: str) -> _Node:
    """DET [ADJ] NOUN -> ["un"] NOUN [ADJ]; consumes the tokens it reads."""
    det = tokens.pop(0) if tokens else None
    if det not in DETS:
        raise _outside_grammar(source, "expected 'the' or 'a'")
    adj = tokens.pop(0) if tokens and tokens[0] in LEXICON["ADJ"] else None
    noun = tokens.pop(0) if tokens else None
    if noun not in LEXICON["NOUN"]:
        raise _outside_grammar(source, "expected a noun")
    return _Seq(_Lit(INDEFINITE if det == "a" else ""), _word("NOUN", noun),
                _word("ADJ", adj) if adj else _Lit(""))


def _translation_model(source: str) -> _Node:
    """Parse ``source`` and build its translation model (:class:`InputError` if not in the grammar)."""
    tokens = source.split()
    if tokens and tokens[0] in LEXICON["PRON"]:
        subject: _Node = _Choice([_word("PRON", tokens.pop(0)), ""])
    else:
        subject = _noun_phrase(tokens, source)
    if not tokens or tokens[0] not in LEXICON["VERB"]:
        raise _outside_grammar(source, "expected a verb")
    verbs = LEXICON["VERB"][tokens.pop(0)]
    verb = _Choice([_Choice(verbs), _Choice([v + PAST_SUFFIX for v in verbs])])
    obj = _Seq(_noun_phrase(tokens, source), _Choice([OBJECT_MARKER, ""]))
    clause = _Choice([_Seq(subject, obj, verb), _Seq(subject, verb, obj)])
    if not tokens:
        return clause
    prep, place = tokens[0], tokens[-1]
    if len(tokens) == 3 and tokens[1] == "the" and prep in LEXICON["PREP"] and place in LEXICON["PLACE"]:
        return _Seq(clause, _word("PLACE", place), _word("PREP", prep))
    if len(tokens) == 1 and tokens[0] in LEXICON["ADV"]:
        adverb = _word("ADV", tokens[0])
        return _Choice([_Seq(clause, adverb), _Seq(adverb, clause)])
    raise _outside_grammar(source, f"unexpected {' '.join(tokens)!r}")


def translation_distribution(source: str) -> List[Tuple[str, float]]:
    """Every valid translation of ``source`` with its weight (summing to 1), heaviest first.

    Ties are ordered by text, so the list is deterministic.
    """
    weights, total = _translation_model(source).dist()
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(text, weight / total) for text, weight in ranked]  # int / int rounds correctly


def sample_translation(source: str, rng: random.Random) -> str:
    """One translation of ``source`` drawn from :func:`translation_distribution`."""
    return _translation_model(source).sample(rng)


def sample_source(rng: random.Random) -> str:
    """A source sentence, choosing each grammar rule's alternatives uniformly."""
    def pick(pos: str) -> str:
        return rng.choice(sorted(LEXICON[pos]))

    def noun_phrase(adj: bool) -> List[str]:
        return [rng.choice(DETS)] + ([pick("ADJ")] if adj else []) + [pick("NOUN")]

    form = rng.randrange(3)
    subject = [pick("PRON")] if form == 0 else noun_phrase(adj=form == 2)
    words = subject + [pick("VERB")] + noun_phrase(adj=rng.random() < 0.5)
    tail = rng.randrange(3)
    if tail == 1:
        words += [pick("PREP"), "the", pick("PLACE")]
    elif tail == 2:
        words += [pick("ADV")]
    return " ".join(words)


def source_space() -> int:
    """The number of distinct source sentences (about nine million)."""
    n = {pos: len(words) for pos, words in LEXICON.items()}
    noun_phrases = len(DETS) * n["NOUN"] * (1 + n["ADJ"])
    return (n["PRON"] + noun_phrases) * n["VERB"] * noun_phrases * (1 + n["PREP"] * n["PLACE"] + n["ADV"])


@dataclass
class SynthCorpus:
    """Training pairs, held-out prompts with their top translation, and their complete gold sets."""

    seed: int
    train: List[Tuple[str, str]]
    valid: List[Tuple[str, str]]
    gold: Gold


#: the most training pairs :func:`generate` samples (held in memory: a few GB)
MAX_TRAIN_PAIRS = 10_000_000


def generate(seed: int = 1, train_pairs: int = 20000, valid_prompts: int = 200) -> SynthCorpus:
    """Sample a corpus; the same arguments always give the same corpus.

    The valid prompts depend only on ``seed`` and ``valid_prompts``; no training source is one of them.
    """
    if train_pairs < 0 or valid_prompts < 0:
        raise InputError("the numbers of training pairs and valid prompts cannot be negative")
    if valid_prompts > source_space() // 100:  # keeps held-out sampling fast and training sources plenty
        raise InputError(f"at most {source_space() // 100} valid prompts (1% of the source sentences)")
    if train_pairs > MAX_TRAIN_PAIRS:  # held in memory: refused now, not after minutes of sampling
        raise InputError(f"at most {MAX_TRAIN_PAIRS} training pairs")
    valid_rng = random.Random(f"nbest-eval-synth:{seed}:valid")
    held_out: Dict[str, None] = {}
    while len(held_out) < valid_prompts:
        held_out[sample_source(valid_rng)] = None
    prompts = [GoldPrompt(prompt_id(src), src, tuple(translation_distribution(src))) for src in held_out]

    train_rng = random.Random(f"nbest-eval-synth:{seed}:train")
    train: List[Tuple[str, str]] = []
    while len(train) < train_pairs:
        src = sample_source(train_rng)
        if src not in held_out:
            train.append((src, sample_translation(src, train_rng)))
    return SynthCorpus(seed, train, [(p.text, p.translations[0][0]) for p in prompts], Gold(prompts))


def translation_counts(gold: Gold) -> Tuple[int, float, int]:
    """(min, median, max) number of valid translations per prompt."""
    counts = [len(p.translations) for p in gold] or [0]
    return min(counts), statistics.median(counts), max(counts)


def write_corpus(out_dir: Union[str, Path], corpus: SynthCorpus, force: bool = False) -> List[Path]:
    """Write :data:`FILES` into ``out_dir``, which must be new or empty unless ``force``.

    ``force`` only overwrites these files; nothing is ever deleted.
    """
    out = Path(out_dir)
    check_empty_folder("the corpus folder", out, force)
    make_folder(out)

    low, median, high = translation_counts(corpus.gold)
    readme = (
        f"A synthetic many-valid-translations corpus made by `nbest-eval synth` (seed {corpus.seed}): "
        f"train.src/train.tgt hold {len(corpus.train)} training pairs, each target drawn from its "
        f"source's translation distribution; valid.src/valid.tgt hold {len(corpus.valid)} held-out "
        f"prompts (never a training source) with their most frequent translation; {GOLD_FILE} holds, in "
        f"STAPLE gold format and the same order, every valid translation of each valid prompt with its "
        f"weight ({low} to {high} per prompt, median {median:g}). The grammar and the weighting are "
        f"described in nbest_eval/analysis/synth.py.\n"
    )
    contents = {
        "train.src": "".join(src + "\n" for src, _ in corpus.train),
        "train.tgt": "".join(tgt + "\n" for _, tgt in corpus.train),
        "valid.src": "".join(src + "\n" for src, _ in corpus.valid),
        "valid.tgt": "".join(tgt + "\n" for _, tgt in corpus.valid),
        GOLD_FILE: format_gold(corpus.gold, str(out / GOLD_FILE)),
        "README.txt": readme,
    }
    paths = [out / name for name in FILES]
    write_files({path: contents[path.name] for path in paths}, overwrite=True)  # all files or none
    return paths
