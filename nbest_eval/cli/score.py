"""Score an n-best file against a STAPLE gold file.

Every gold prompt is scored; a prompt with no hypotheses in the file counts as an empty list.
BLEU values are on sacrebleu's 0-100 scale, all other metrics on 0-1.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..formats import FORMATS, read_gold, read_nbest
from ..output import check_writable
from .common import add_scorer_arguments, print_table, scorer_from_args, write_jsonl

PROGRESS_MIN_PROMPTS = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gold", required=True, help="STAPLE gold file (ID|prompt, then translation|weight lines)")
    parser.add_argument("--nbest", required=True, help="n-best file to score")
    parser.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                        help="format of --nbest (default: detect it)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: the metric keys plus n_prompts")
    parser.add_argument("--per-prompt", metavar="OUT.jsonl",
                        help="also write one JSON object per prompt: id and each metric's value")
    parser.add_argument("--force", action="store_true", help="overwrite --per-prompt's file if it exists")
    add_scorer_arguments(parser)


def run(args: argparse.Namespace) -> int:
    scorer = scorer_from_args(args)
    check_writable([args.per_prompt], args.force)
    gold = read_gold(args.gold)
    nbest = read_nbest(args.nbest, gold, args.format)
    scored = scorer.score(gold, nbest, keep_per_prompt=bool(args.per_prompt),
                          progress=len(gold) >= PROGRESS_MIN_PROMPTS and sys.stderr.isatty())
    if args.per_prompt:
        write_jsonl(args.per_prompt, [{"id": pid, **scorer.values(stats)} for pid, stats in scored.per_prompt],
                    args.force)
    summary = f"{scored.n_prompts} prompts, {scored.n_empty} with no hypotheses"
    for key, count in scorer.counted(scored.stats).items():
        summary += f"; {key} over {count} prompts"
    if args.json:
        print(json.dumps({**scored.values, "n_prompts": scored.n_prompts}))
        print(summary, file=sys.stderr)
    else:
        print(f"{args.nbest}: {summary}")
        print_table(scored.values)
    return 0
