"""Convert an n-best file to tsv, jsonl or STAPLE, or export it as a TREC run and qrels.

The gold validates the prompt ids, maps fairseq sample ids to prompts (sample i = the gold's i-th
prompt) and gives the prompt texts of a STAPLE file. Output lists are in gold order; a STAPLE file
drops model scores. --to trec writes OUT.run and OUT.qrels (see nbest_eval.formats.trec), e.g.
for "trec_eval -c -m map OUT.qrels OUT.run". Existing files are never replaced without --force.
"""

from __future__ import annotations

import argparse
import sys

from ..formats import FORMATS, read_gold, read_nbest, write_nbest, write_trec

TARGETS = ("tsv", "jsonl", "staple", "trec")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", required=True, help="STAPLE gold file")
    parser.add_argument("--nbest", required=True, metavar="FILE", help="n-best file to convert")
    parser.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                        help="format of --nbest (default: detect it)")
    parser.add_argument("--to", required=True, choices=TARGETS, help="output format")
    parser.add_argument("output", metavar="OUT", help="output file (for trec: the prefix of OUT.run and OUT.qrels)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def run(args: argparse.Namespace) -> int:
    gold = read_gold(args.gold)
    nbest = read_nbest(args.nbest, gold, args.format)
    if args.to == "trec":
        outputs = [f"{args.output}.run", f"{args.output}.qrels"]
        write_trec(gold, nbest, *outputs, overwrite=args.force)
    else:
        outputs = [args.output]
        write_nbest(nbest, args.output, args.to, gold=gold, overwrite=args.force)
    n_hyps = sum(len(hyps) for hyps in nbest.values())
    print(f"{len(nbest)} prompts, {n_hyps} hypotheses -> {', '.join(outputs)}", file=sys.stderr)
    return 0
