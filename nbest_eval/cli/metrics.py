"""List the metric keys and what each measures (exact definitions: docs/metrics.md)."""

from __future__ import annotations

import argparse

from ..metrics import REGISTRY
from ..metrics.registry import markdown_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print the README's Markdown table")


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    width = max(len(spec.pattern) for spec in REGISTRY)
    for spec in REGISTRY:
        print(f"{spec.pattern:<{width}}  {spec.help.replace('`', '')}")
    return 0
