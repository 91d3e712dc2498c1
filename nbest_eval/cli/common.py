"""Options, input and output helpers shared by the sub-commands that read and score n-best files."""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import contextmanager
from functools import partial
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Sequence, TextIO, Tuple

from ..analysis.text import format_interval, format_value, reported  # noqa: F401 (score.py reads it here)
from ..data import Gold, InputError, NBest
from ..files.output import write_text
from ..formats import FORMATS, MAX_LINE_BYTES, detect_format, open_input, read_gold, read_nbest
from ..formats.common import (
    LINE_BYTES_LIMIT,
    LineSource,
    Source,
    check_inputs,
    clip,
    is_stream,  # noqa: F401 (for the commands, with check_inputs)
    join_lines,
    json_text,
)
from ..metrics import PARAMS, Param, is_metric_key, key_help
from ..metrics.registry import unknown_metric
from ..scorer import DEFAULT_METRICS, Scorer, parse_metric_list
from ..significance import DEFAULT_SAMPLES, DEFAULT_SEED, Interval

MAX_RESAMPLES = 1_000_000
#: --n-samples' default where the test alone sets it (score, compare)
N_SAMPLES_DEFAULT = (f"{DEFAULT_SAMPLES['bs']} bootstrap resamples, {DEFAULT_SAMPLES['ar']} "
                     f"approximate-randomization trials")
#: a progress bar shows once the work has lasted this long, so that quick runs print nothing
PROGRESS_DELAY_S = 2.0


def add_input_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """--gold, --nbest and --format for a command that reads one n-best file, plus the reading options."""
    parser.add_argument("--gold", required=True,
                        help="STAPLE gold file (ID|prompt, then translation|weight lines); - reads standard input")
    parser.add_argument("--nbest", required=True, metavar="FILE",
                        help=f"n-best file to {verb}; - reads standard input (a pipe or FIFO works too)")
    parser.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                        help="format of --nbest (default: detect it, and say so on stderr; lines, K lines per "
                             "prompt as OpenNMT-py and CTranslate2 write them, is never detected and needs "
                             "--nbest-size)")
    add_reading_arguments(parser)


def positive_int(text: str, maximum: int = 1 << 62) -> int:
    """An option's integer >= 1 (ASCII digits), at most ``maximum``: an absurd one is refused here,
    not by whatever it would reach."""
    digits = text.isascii() and text.isdigit()
    value = (int(text) if len(text) < 20 else maximum + 1) if digits else None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {clip(text)}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"{clip(text)} is too large: at most {maximum}")
    return value


def non_negative_int(text: str) -> int:
    """--seed: numpy's generators take integers >= 0."""
    try:
        return 0 if text == "0" else positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {clip(text)}") from None


def resample_count(text: str) -> int:
    """--n-samples: at most a million (the resamples x prompts matrix must fit in memory)."""
    return positive_int(text, MAX_RESAMPLES)


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """--max-line-bytes, --allow-rank-gaps and --nbest-size, for every command that reads gold or n-best files
    (:func:`reading_options` passes the last two on)."""
    group = parser.add_argument_group("reading")
    group.add_argument("--max-line-bytes", type=partial(positive_int, maximum=LINE_BYTES_LIMIT), default=MAX_LINE_BYTES,
                       metavar="N",
                       help="longest line read, in bytes; a longer one is an error (default: %(default)s)")
    group.add_argument("--allow-rank-gaps", action="store_true",
                       help="tsv n-best files: ranks may skip numbers (1, 5, 100) and only their order counts "
                            "(default: a gap is an error, since it means lines are missing)")
    group.add_argument("--nbest-size", type=positive_int, metavar="K",
                       help="--format lines: K lines (hypotheses) per gold prompt, in gold order; required with "
                            "lines, refused with any other format")


def reading_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The reading options of :func:`~nbest_eval.formats.read_nbest` and ``iter_nbest`` in ``args``."""
    return {"allow_rank_gaps": args.allow_rank_gaps, "nbest_size": args.nbest_size}


def check_nbest_size(args: argparse.Namespace) -> None:
    """--nbest-size goes with --format lines, and only with it; said in option terms before reading."""
    if args.format == "lines" and args.nbest_size is None:
        raise InputError("--format lines needs --nbest-size K, the number of lines (hypotheses) per gold prompt")
    if args.format != "lines" and args.nbest_size is not None:
        raise InputError(f"--nbest-size is for --format lines only, not {args.format} (lines is never detected: "
                         f"ask for it)")


def read_inputs(args: argparse.Namespace) -> Tuple[Gold, NBest]:
    """The gold (--gold) and the n-best lists (--nbest) of a command's arguments."""
    check_inputs({"--gold": args.gold, "--nbest": args.nbest})
    gold = read_gold(args.gold, args.max_line_bytes)
    return gold, read_nbest_file(args, args.nbest, gold)


@contextmanager
def open_nbest(args: argparse.Namespace, source: Source) -> Iterator[Tuple[LineSource, str]]:
    """One n-best file, opened once, and its format; with --format auto, the detected format is
    reported on stderr."""
    check_nbest_size(args)
    with open_input(source, args.max_line_bytes) as lines:
        format = args.format
        if format == "auto":
            format = detect_format(lines)
            print(f"nbest-eval {args.command}: reading {lines.name} as {format} (detected)", file=sys.stderr)
        yield lines, format


def read_nbest_file(args: argparse.Namespace, source: Source, gold: Gold) -> NBest:
    """One n-best file's lists, all in memory (see :func:`open_nbest`)."""
    with open_nbest(args, source) as (lines, format):
        return read_nbest(lines, gold, format, **reading_options(args))


def add_scorer_arguments(parser: argparse.ArgumentParser, default_metrics: Sequence[str] = DEFAULT_METRICS,
                         recorded: bool = False) -> None:
    """--metrics, and an option for each parameter the metrics declare (``--wf1-top`` for ``wf1_top``).
    ``recorded``: each defaults to what the training run recorded (select), so left out it is None,
    told from a value given; the help then gives the declared default as that of n-best files."""
    group = parser.add_argument_group("metrics")
    metrics = ",".join(default_metrics)
    group.add_argument("--metrics", default=None if recorded else metrics,
                       help=f"comma-separated metric keys{_default_note(metrics, recorded)}. Keys: {key_help()}; "
                            f"definitions: docs/metrics.md")
    exclusive: Dict[str, Any] = {}  # group name -> argparse's group
    for param in PARAMS.values():
        if param.exclusive and param.exclusive not in exclusive:
            exclusive[param.exclusive] = group.add_mutually_exclusive_group()
        target = exclusive[param.exclusive] if param.exclusive else group
        target.add_argument("--" + param.name.replace("_", "-"), **_argument(param, recorded))


def _argument(param: Param, recorded: bool) -> Dict[str, Any]:
    """``add_argument``'s keywords for a declared parameter: a flag for a bool, whose declared
    default (the flag's absence) goes unsaid."""
    default = None if recorded else param.default
    note = _default_note(param.default, recorded) if recorded or param.type is not bool else ""
    if param.type is bool:
        return {"action": "store_false" if param.default else "store_true", "default": default,
                "help": param.help + note}
    return {"type": param.type, "default": default, "choices": param.choices, "metavar": param.metavar,
            "help": param.help + note}


def _default_note(declared: Any, recorded: bool) -> str:
    """`` (default: ...)``: the declared default (none said when there is none), or the run's."""
    if recorded:
        return " (default: the run's" + ("" if declared is None else f"; n-best files: {declared}") + ")"
    return "" if declared is None else " (default: %(default)s)"


def add_resampling_arguments(parser: argparse.ArgumentParser, what: str, default: str = N_SAMPLES_DEFAULT) -> None:
    """--n-samples (``what`` it counts, and by ``default`` how many) and --seed, for intervals and
    paired tests (docs/significance.md)."""
    group = parser.add_argument_group("resampling (docs/significance.md)")
    group.add_argument("--n-samples", type=resample_count, metavar="N",
                       help=f"{what} (default: {default})")
    group.add_argument("--seed", type=non_negative_int, default=DEFAULT_SEED,
                       help="seed of the resampling draws, sacrebleu's default (default: %(default)s)")


def check_measures(reference: str, metrics: Sequence[str], plotted: Sequence[str]) -> None:
    """Before any n-best file is read: the reference measure and --metrics are metric keys and what
    a plot shows is scored, so that a typo is not found only after every system is scored."""
    for option, keys in (("--reference", [reference]), ("--metrics", metrics), ("--scatter", plotted)):
        for key in keys:
            if not is_metric_key(key):
                raise InputError(f"{option}: {unknown_metric(key)}")
    missing = [key for key in plotted if key not in (reference, *metrics)]
    if missing:
        raise InputError(f"--scatter: {missing[0]} is not scored; add it to --metrics")


def scorer_from_args(args: argparse.Namespace) -> Scorer:
    return Scorer(parse_metric_list(args.metrics), **{name: getattr(args, name) for name in PARAMS})


def print_table(values: Mapping[str, Any], file: TextIO = sys.stdout,
                intervals: Optional[Mapping[str, Optional[Interval]]] = None) -> None:
    """``key  value`` lines (a value: a number, None or a string), with each key's interval if given."""
    width = max(len(k) for k in values)
    for key, value in values.items():
        cell = value if isinstance(value, str) else format_value(value)
        if intervals is not None:
            cell = f"{cell:>10}  {format_interval(intervals.get(key))}"
        print(f"{key:<{width}}  {cell}", file=file)


def warn_not_finite(command: str, what: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """JSON has no nan or infinity: say on stderr which values are written as null instead."""
    bad = [{k: v for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)} for row in rows]
    bad = [values for values in bad if values]
    if bad:
        first = ", ".join(f"{k} = {v}" for k, v in bad[0].items())
        print(f"nbest-eval {command}: {what}: {len(bad)} row(s) hold nan or infinite values, written as null "
              f"(first: {first})", file=sys.stderr)


def write_jsonl(path: str, rows: Sequence[Dict], force: bool) -> None:
    """One strict JSON object per line (``-``: standard output); refuses to replace an existing file
    unless ``force``."""
    write_text(path, join_lines(json_text(row) for row in rows), overwrite=force)


def progress(items: Sequence, what: str, unit: str, leave: bool = False) -> Iterable:
    """``items`` with a bar on stderr (never stdout, which holds results) once the work has lasted
    :data:`PROGRESS_DELAY_S`, and only on a terminal (:func:`progress_shown`); ``leave``: the bar
    stays when done."""
    from tqdm import tqdm

    return tqdm(items, desc=what, unit=unit, delay=PROGRESS_DELAY_S, leave=leave, file=sys.stderr,
                disable=len(items) < 2 or not progress_shown())


def progress_shown() -> bool:
    """Bars go to a terminal only: a log file gets no carriage-return lines."""
    return sys.stderr.isatty()
