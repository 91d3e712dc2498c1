"""Score an n-best file against a STAPLE gold file.

Every gold prompt is scored; a prompt with no hypotheses in the file counts as an empty list.
BLEU values are on sacrebleu's 0-100 scale, all other metrics on 0-1. JSON output is strict: an
undefined value is null, and so is a nan or infinite one (said on stderr). Either input may be -
(standard input), but not both.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Optional, Tuple

from ..data import Gold, InputError
from ..files.writable import check_outputs
from ..formats import FileParts, Ungrouped, iter_nbest, read_gold
from ..formats.common import json_text
from ..metrics import N_REL
from ..metrics.counts import COUNTS
from ..processes.workers import available_cores, score_stream
from ..scorer import Scored, Scorer
from ..signature import resampling, signature, signatures
from ..significance import DEFAULT_SAMPLES, PerPrompt, confidence_intervals, interval_note
from ..stats import Stats
from .common import (
    add_input_arguments,
    add_resampling_arguments,
    add_scorer_arguments,
    check_inputs,
    is_stream,
    open_nbest,
    positive_int,
    print_table,
    read_nbest_file,
    reading_options,
    reported,
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
    parser.add_argument("--confidence", action="store_true",
                        help="add each measure's 95%% bootstrap confidence interval over prompts (sacrebleu's "
                             "convention: the resamples' mean and their 2.5%% and 97.5%% values)")
    parser.add_argument("--jobs", type=positive_int, default=available_cores(), metavar="N",
                        help="worker processes that score while the file is read; the values do not depend on "
                             "it (default: the available cores, %(default)s)")
    add_resampling_arguments(parser, "--confidence: bootstrap resamples")
    add_scorer_arguments(parser)


def run(args: argparse.Namespace) -> int:
    asked = scorer_from_args(args)
    scorer = Scorer(list(dict.fromkeys(asked.keys + list(COUNTS))), **asked.options)
    check_outputs({"--per-prompt": args.per_prompt}, [args.gold, args.nbest], args.force)
    check_inputs({"--gold": args.gold, "--nbest": args.nbest})
    gold = read_gold(args.gold, args.max_line_bytes)
    scored, format = score_file(args, scorer, gold)
    if args.per_prompt:
        run_signature = signature(asked, gold, scored.nbest_size)
        rows = [{"id": pid, **values_of(asked, stats), "signature": run_signature} for pid, stats in scored.per_prompt]
        warn_not_finite(args.command, "--per-prompt", rows)
        write_jsonl(args.per_prompt, rows, args.force)
    intervals, resampled = {}, None
    if args.confidence:
        n_samples = args.n_samples or DEFAULT_SAMPLES["bs"]
        intervals = confidence_intervals(PerPrompt(asked, scored.per_prompt), n_samples, args.seed)
        resampled = resampling("bs", n_samples, args.seed)
        note = interval_note(n_samples)
        if note:
            print(f"nbest-eval score: warning: {note}", file=sys.stderr)
    signed = signatures(asked, gold, scored.nbest_size, resampled)
    values, counts = values_of(asked, scored.stats), summary_counts(scorer, scored)
    summary = f"{scored.n_prompts} prompts, {scored.n_empty} with no hypotheses"
    for key, count in asked.counted(scored.stats).items():
        summary += f"; {key} over {count} prompts"
    hint = missing_prompts_hint(format, scored)
    if hint:
        print(f"nbest-eval score: warning: {hint}", file=sys.stderr)
    out = sys.stderr if args.per_prompt == "-" else sys.stdout
    if args.json:
        warn_not_finite(args.command, "--json", [values])
        ci = {f"{key}_ci": None if found is None else found.as_dict() for key, found in intervals.items()}
        print(json_text({**values, **ci, **counts, "signatures": signed}), file=out)
        print(summary, file=sys.stderr)
    else:
        print(f"{args.nbest}: {summary}", file=out)
        print_table(values, file=out, intervals=intervals if args.confidence else None)
        print("summary:", file=out)
        print_table(counts, file=out)
        print("signatures:", file=out)
        print_table(signed, file=out)
    return 0


def values_of(scorer: Scorer, stats: Stats) -> Dict[str, Any]:
    """The measures ``scorer`` was asked for, as reported (a summary count as an integer)."""
    return {key: reported(key, value) for key, value in scorer.values(stats).items()}


def summary_counts(scorer: Scorer, scored: Scored) -> Dict[str, int]:
    """The prompts, and trec_eval's summary statistics, which ``score`` always shows: num_q, the prompts
    with valid translations (the ones trec_eval -c evaluates), and the sums num_ret, num_rel, num_rel_ret."""
    totals = scorer.values(scored.stats)
    return {"n_prompts": scored.n_prompts, "num_q": int(scored.stats[N_REL]),
            **{key: int(totals[key]) for key in COUNTS}}


def missing_prompts_hint(format: str, scored: Scored) -> Optional[str]:
    """Why fairseq-generate output lacks prompts, the usual reason: it drops a last batch (issue 29)."""
    if format != "fairseq" or not scored.n_empty:
        return None
    return (f"{scored.n_empty} of {scored.n_prompts} prompts have no hypotheses in this fairseq output, and "
            f"count as empty lists (as if nothing was generated). fairseq drops a last batch whose size is not a "
            f"multiple of --required-batch-size-multiple (default 8; fairseq issue 5036): generate with "
            f"--required-batch-size-multiple 1")


def score_file(args: argparse.Namespace, scorer: Scorer, gold: Gold) -> Tuple[Scored, str]:
    """Score --nbest as it is read (one prompt's list at a time, over --jobs workers); a file whose
    lines are not grouped by prompt is read whole instead. Also returns the file's format."""
    keep = bool(args.per_prompt) or args.confidence
    with open_nbest(args, args.nbest) as (lines, format):
        groups = iter_nbest(lines, gold, format, **reading_options(args))
        parts = None if is_stream(args.nbest) else FileParts(lines, gold, format, **reading_options(args))
        if (args.jobs == 1 or parts is None) and len(gold) >= PROGRESS_MIN_PROMPTS and sys.stderr.isatty():
            from tqdm import tqdm  # only where this process reads the groups it is given

            groups = tqdm(groups, total=len(gold), desc="scoring", unit="prompt", leave=False)
        try:
            return score_stream(scorer, gold, groups, jobs=args.jobs, keep_per_prompt=keep, parts=parts), format
        except Ungrouped as err:
            if is_stream(args.nbest):
                raise InputError(f"the lists are not grouped by prompt (prompt {err.prompt_id!r} {err.why}), so "
                                 f"they cannot be scored as they stream in: write them to a file, or group each "
                                 f"prompt's lines together", err.path, err.line) from None
    nbest = read_nbest_file(args, args.nbest, gold)
    return score_stream(scorer, gold, nbest.items(), jobs=args.jobs, keep_per_prompt=keep), format

