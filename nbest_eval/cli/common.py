"""Options and output helpers shared by the sub-commands that score."""

from __future__ import annotations

import argparse
import json
from typing import Dict, Mapping, Optional, Sequence

from sacrebleu.metrics.bleu import BLEU

from ..formats.common import join_lines
from ..metrics import key_help
from ..output import write_files
from ..scorer import DEFAULT_METRICS, Scorer, parse_metric_list


def add_scorer_arguments(parser: argparse.ArgumentParser, default_metrics: Sequence[str] = DEFAULT_METRICS) -> None:
    group = parser.add_argument_group("metrics")
    group.add_argument("--metrics", default=",".join(default_metrics),
                       help=f"comma-separated metric keys (default: %(default)s). Keys: {key_help()}; "
                            f"definitions: docs/metrics.md")
    trunc = group.add_mutually_exclusive_group()
    trunc.add_argument("--wf1-top", type=int, metavar="N", help="F1 family: keep only the top N hypotheses")
    trunc.add_argument("--wf1-threshold", type=float, metavar="TAU",
                       help="F1 family: keep hypotheses whose probability is at least TAU times the rank-1 "
                            "hypothesis' (needs model scores, read as natural-log probabilities; fairseq's "
                            "base-2 scores are converted when read)")
    group.add_argument("--bleu-tokenize", default="13a", choices=list(BLEU.TOKENIZERS), metavar="TOKENIZER",
                       help=f"sacrebleu tokenizer for BLEU: {', '.join(BLEU.TOKENIZERS)} (default: %(default)s)")
    group.add_argument("--bleu-lowercase", action="store_true", help="lowercase before BLEU")
    group.add_argument("--rbp-p", type=float, default=0.5, help="persistence of RBP' (default: %(default)s)")


def scorer_from_args(args: argparse.Namespace) -> Scorer:
    return Scorer(parse_metric_list(args.metrics), bleu_tokenize=args.bleu_tokenize,
                  bleu_lowercase=args.bleu_lowercase, wf1_top=args.wf1_top,
                  wf1_threshold=args.wf1_threshold, rbp_p=args.rbp_p)


def format_value(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def print_table(values: Mapping[str, Optional[float]]) -> None:
    width = max(len(k) for k in values)
    for key, value in values.items():
        print(f"{key:<{width}}  {format_value(value)}")


def write_jsonl(path: str, rows: Sequence[Dict], force: bool) -> None:
    """One JSON object per line; refuses to replace an existing file unless ``force``."""
    write_files({path: join_lines(json.dumps(row, ensure_ascii=False) for row in rows)}, overwrite=force)
