"""Write the synthetic many-valid-translations corpus (train, valid, STAPLE gold) into a directory.

The language is fixed (see nbest_eval/analysis/synth.py); --seed only drives the sampling, and the same
arguments always write byte-identical files. A non-empty OUT_DIR is refused unless --force, which
overwrites the corpus files and deletes nothing.
"""

from __future__ import annotations

import argparse

from ..analysis.synth import generate, translation_counts, write_corpus
from ..files.writable import check_empty_folder


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory to write (created if missing)")
    parser.add_argument("--seed", type=int, default=1, help="sampling seed (default: %(default)s)")
    parser.add_argument("--train-pairs", type=non_negative_int, default=20000, metavar="N",
                        help="training pairs (default: %(default)s)")
    parser.add_argument("--valid-prompts", type=non_negative_int, default=200, metavar="M",
                        help="held-out prompts with complete gold sets (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty OUT_DIR")


def run(args: argparse.Namespace) -> int:
    check_empty_folder("OUT_DIR", args.out_dir, args.force)  # before the corpus is generated
    corpus = generate(args.seed, args.train_pairs, args.valid_prompts)
    paths = write_corpus(args.out_dir, corpus, force=args.force)
    low, median, high = translation_counts(corpus.gold)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    print(f"seed {corpus.seed}: {len(corpus.train)} train pairs, {len(corpus.valid)} valid prompts, "
          f"translations per prompt min/median/max {low}/{median:g}/{high}")
    return 0
