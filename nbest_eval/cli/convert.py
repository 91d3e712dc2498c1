"""Convert an n-best file to tsv, jsonl, STAPLE, Moses or lines, or export it as a TREC run and qrels.

The gold validates the prompt ids, maps fairseq sample ids and Moses sentence ids to prompts
(sample i = the gold's i-th prompt), gives the prompt texts of a STAPLE file and the sentence ids of
a Moses file. Output lists are in gold order. STAPLE and lines files drop model scores; Moses lines
need one (written as the total and as the only feature, F0); jsonl refuses -inf scores (JSON cannot
hold them; tsv can); lines needs every gold prompt to have a list of the same length K (read it back
with --format lines --nbest-size K). --to trec writes OUT.run and OUT.qrels (see
nbest_eval.formats.trec), e.g. for "trec_eval -c -m map OUT.qrels OUT.run": both or, when one cannot
be written, neither. OUT - writes any other format to standard output. Existing files are never
replaced without --force, and an input never.
"""

from __future__ import annotations

import argparse
import sys

from ..data import InputError
from ..files.writable import check_outputs
from ..formats import write_nbest, write_trec
from ..wording import counted
from .common import add_input_arguments, read_inputs

TARGETS = ("tsv", "jsonl", "staple", "moses", "lines", "trec")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, "convert")
    parser.add_argument("--to", required=True, choices=TARGETS, help="output format")
    parser.add_argument("output", metavar="OUT", help="output file, - for standard output (for trec: the prefix of "
                                                      "OUT.run and OUT.qrels)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def run(args: argparse.Namespace) -> int:
    if args.to == "trec" and args.output == "-":
        raise InputError("--to trec writes two files, OUT.run and OUT.qrels: give OUT as a path prefix, not -")
    outputs = ({"OUT.run": f"{args.output}.run", "OUT.qrels": f"{args.output}.qrels"} if args.to == "trec" else
               {"OUT": args.output})
    check_outputs(outputs, [args.gold, args.nbest], args.force)
    gold, nbest = read_inputs(args)
    n_hyps = sum(len(hyps) for hyps in nbest.values())
    read = f"{counted(len(nbest), 'prompt')}, {counted(n_hyps, 'hypothesis', 'hypotheses')}"
    if args.to == "trec":
        ranked, valid = write_trec(gold, nbest, *outputs.values(), overwrite=args.force)
        repeats = f" ({n_hyps - ranked} repeating a key of their list after normalization left out: a run ranks " \
                  f"each document once)" if ranked < n_hyps else ""
        print(f"{read} -> {outputs['OUT.run']}: {counted(ranked, 'distinct hypothesis', 'distinct hypotheses')}"
              f"{repeats}; {outputs['OUT.qrels']}: {counted(valid, 'valid translation', 'valid translations')}",
              file=sys.stderr)
        return 0
    write_nbest(nbest, args.output, args.to, gold=gold, overwrite=args.force)
    print(f"{read} -> {'standard output' if args.output == '-' else args.output}", file=sys.stderr)
    return 0
