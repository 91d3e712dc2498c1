"""Score an n-best file against a STAPLE gold file.

Every gold prompt is scored; a prompt with no hypotheses in the file counts as an empty list.
BLEU values are on sacrebleu's 0-100 scale, all other metrics on 0-1. JSON output is strict: an
undefined value is null, and so is a nan or infinite one (said on stderr). Either input may be -
(standard input), but not both.
"""

from __future__ import annotations

import argparse
import sys

from ..formats.common import json_text
from ..output import check_outputs
from .common import (
    add_input_arguments,
    add_scorer_arguments,
    print_table,
    read_inputs,
    scorer_from_args,
    warn_not_finite,
    write_jsonl,
)

PROGRESS_MIN_PROMPTS = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, "score")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: the metric keys plus n_prompts")
    parser.add_argument("--per-prompt", metavar="OUT.jsonl",
                        help="also write one JSON object per prompt: id and each metric's value; - writes them "
                             "to standard output, and the summary (table or --json) then goes to stderr")
    parser.add_argument("--force", action="store_true", help="overwrite --per-prompt's file if it exists")
    add_scorer_arguments(parser)


def run(args: argparse.Namespace) -> int:
    scorer = scorer_from_args(args)
    check_outputs({"--per-prompt": args.per_prompt}, [args.gold, args.nbest], args.force)
    gold, nbest = read_inputs(args)
    scored = scorer.score(gold, nbest, keep_per_prompt=bool(args.per_prompt),
                          progress=len(gold) >= PROGRESS_MIN_PROMPTS and sys.stderr.isatty())
    if args.per_prompt:
        rows = [{"id": pid, **scorer.values(stats)} for pid, stats in scored.per_prompt]
        warn_not_finite(args.command, "--per-prompt", rows)
        write_jsonl(args.per_prompt, rows, args.force)
    summary = f"{scored.n_prompts} prompts, {scored.n_empty} with no hypotheses"
    for key, count in scorer.counted(scored.stats).items():
        summary += f"; {key} over {count} prompts"
    out = sys.stderr if args.per_prompt == "-" else sys.stdout
    if args.json:
        warn_not_finite(args.command, "--json", [scored.values])
        print(json_text({**scored.values, "n_prompts": scored.n_prompts}), file=out)
        print(summary, file=sys.stderr)
    else:
        print(f"{args.nbest}: {summary}", file=out)
        print_table(scored.values, file=out)
    return 0
