"""Score saved checkpoints (or precomputed n-best files) and pick the best.

Sources of n-best lists (one of):
  --fairseq-data DATA_BIN CKPT...   fairseq checkpoints of the translation_nbest task (paths or
                                     globs); generation reuses the plugin's code and options
  --hf CKPT_DIR...                  Hugging Face checkpoint directories (e.g. out/checkpoint-*)
  --from-nbest PATH...              n-best files, or directories of them (their .tsv, .jsonl, .txt
                                     and .out files but *gold.txt): one system per file

Checkpoints are generated and scored as their run validated: with the settings each recorded (a
fairseq checkpoint's task config; the nbest_eval.json the HF callback writes beside a checkpoint),
on the prompts the run validated on; a generation or scorer option given overrides the record and
select says so; a setting no checkpoint recorded, or that checkpoints recorded differently, is
refused naming the option to pass (docs/cli.md). n-best files are scored against every
gold prompt, a prompt without a list as an empty one.

Checkpoints are listed in training order (by the numbers in their names); fairseq's aliases
checkpoint_best.pt / checkpoint_last.pt / checkpoint.best_*.pt are left out, and so are second
names (links, hard links) of an input, the gold, an HF callback's post-training list of a step
already saved (nbest-stepN-2.jsonl) and, in a directory or a glob, an earlier run's
--link-best link, --save table or --cache at the name this run writes to (told by their content).
Every other file found or named is an input, and an output that is an input (by file identity) is
refused, even with --force. Checkpoints are only read: never modified, moved or deleted.
Results are cached by content (see --cache), so a re-run scores only new or changed checkpoints;
runs may share a cache. --save and --link-best are written together at the end, or neither,
and the pick is linked only if it still holds the content that was scored (training may have
deleted or replaced it since).

How sure: each checkpoint gets a 95% bootstrap interval on --metric and a paired test against the
best (--paired, default the paired bootstrap over prompts), Holm-corrected across the checkpoints;
the checkpoints whose corrected p-value is at least --alpha are statistically tied with the best,
and --prefer earliest-tied picks the earliest of them (fewer updates, same quality as far as the
validation set can tell). The cache keeps each checkpoint's per-prompt statistics, so a re-run
resamples without re-scoring. See docs/significance.md.

--pr-curve OUT.png draws the mean interpolated recall-precision curve (iprec0.0 ... iprec1.0, which
it adds to the measures scored) of the pick against the first and the last checkpoint; the points are
in --json as pr_curve.

--average K --average-out PATH (checkpoints only) averages the parameters of the K best checkpoints
by --metric (a fairseq checkpoint, or a Hugging Face model directory), scores the average like any
checkpoint and shows it below the table with its interval and p-value against the best single one.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Optional

from ..analysis.recall_precision import IPREC_KEYS, draw_curves
from ..analysis.systems import write_table
from ..data import Gold, InputError
from ..files.output import all_or_nothing
from ..formats import FORMATS, read_gold
from ..metrics import PARAMS, UnknownMetric, higher_is_better
from ..scorer import DEFAULT_METRICS, VALIDATION_METRICS, Scorer
from ..selection import PREFERENCES
from ..selection.checkpoint_files import link_best
from ..selection.report import SelectReport, system_name
from ..selection.scoring import Averaging, cache_key, select_checkpoints
from ..significance import BOOTSTRAP_RESAMPLES, DEFAULT_ALPHA, DEFAULT_SAMPLES, TESTS, paired_help, resamples_for
from ..significance.resampling import check_memory
from ..training.early_stopping import DEFAULT_RULE, RULES, UNTIL_SIGNIFICANT, EarlyStopping, rules_help
from .common import add_resampling_arguments, add_scorer_arguments, progress
from .select_inputs import check_select_outputs, list_inputs, own_files
from .select_source import Source, add_generation_arguments, nbest_source

CACHE_NAME = ".nbest-eval-select-cache.json"
#: --n-samples' default as select resolves it (:func:`~nbest_eval.significance.resamples_for`), in numbers
N_SAMPLES_DEFAULT = (f"enough for Holm over the checkpoints at --alpha: {DEFAULT_SAMPLES['bs']} resamples or "
                     f"{DEFAULT_SAMPLES['ar']} trials, or 10 x comparisons / alpha rounded up to thousands where that "
                     f"is more, e.g. {resamples_for(10)} for 11 checkpoints at --alpha {DEFAULT_ALPHA}; the output "
                     f"says how many")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="CHECKPOINT",
                        help="checkpoints, checkpoint directories or n-best files (globs allowed)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--fairseq-data", metavar="DATA_BIN", help="fairseq-preprocess output of the valid split")
    source.add_argument("--hf", action="store_true", help="the inputs are Hugging Face checkpoint directories")
    source.add_argument("--from-nbest", action="store_true", help="the inputs are n-best files or directories of them")
    parser.add_argument("--gold", required=True, help="STAPLE gold file")
    parser.add_argument("--metric", default="map",
                        help="the selection key, a measure (not a count such as num_ret); select maximizes it, or "
                             "minimizes a lower-is-better one (e{b}) (default: %(default)s)")
    parser.add_argument("--minimize", action="store_true",
                        help="never needed: --metric's direction is the measure's own; accepted with a "
                             "lower-is-better --metric (e{b}), as older scripts pass it, refused with the others")
    parser.add_argument("--patience", type=int, metavar="P",
                        help="also report where early stopping with patience P (--stopping's rule) would have "
                             "stopped, in checkpoint order, and what it would have kept")
    parser.add_argument("--stopping", choices=RULES,
                        help=f"the early-stopping rule replayed with --patience, as the fairseq plugin and the HF "
                             f"callback decide in the loop; tests at --alpha. {rules_help()}")
    parser.add_argument("--stopping-warmup", metavar=f"N|{UNTIL_SIGNIFICANT}",
                        help=f"validations that count no patience: a number, or {UNTIL_SIGNIFICANT} (until one is "
                             f"significantly better than the first; the default, but none for strict)")
    significance = parser.add_argument_group("how sure (docs/significance.md)")
    significance.add_argument("--paired", default="bs", choices=TESTS,
                              help=f"test of each checkpoint against the best on --metric: {paired_help()} "
                                   f"(default: %(default)s)")
    significance.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                              help="tied with the best: Holm-corrected p-value >= ALPHA (default: %(default)s)")
    significance.add_argument("--prefer", default="best", choices=PREFERENCES,
                              help="the pick (--link-best, 'choice'): the best value, or the earliest checkpoint "
                                   "tied with it (default: %(default)s)")
    significance.add_argument("--average", type=int, metavar="K",
                              help="also average the parameters of the K best checkpoints by --metric into "
                                   "--average-out, and score the average")
    significance.add_argument("--average-out", metavar="PATH",
                              help="--average's checkpoint (fairseq) or model directory (Hugging Face)")
    add_resampling_arguments(parser, "bootstrap resamples of the intervals and --paired bs, trials of --paired ar",
                             default=N_SAMPLES_DEFAULT)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the table as JSON")
    output.add_argument("--csv", action="store_true", help="print the table as CSV")
    parser.add_argument("--save", metavar="FILE", help="also write the table (.csv or .json) to FILE")
    parser.add_argument("--columns", metavar="KEYS|all",
                        help=f"the measures of the text table: comma-separated keys, or all (default: --metric and "
                             f"those of {','.join(VALIDATION_METRICS)} scored; --json, --csv and --save have all)")
    parser.add_argument("--pr-curve", metavar="OUT.png",
                        help="draw the mean interpolated recall-precision curve at the 11 standard recall levels "
                             "(iprec0.0 ... iprec1.0, by --iprec-rule; scored too) of the pick, the first and the "
                             "last checkpoint (the points in --json as pr_curve)")
    parser.add_argument("--link-best", metavar="PATH",
                        help="make PATH a link to (or copy of) the best checkpoint, if it still holds the content "
                             "scored")
    parser.add_argument("--force", action="store_true",
                        help="replace --save's file, --pr-curve's figure or --link-best's link")
    parser.add_argument("--cache", metavar="FILE",
                        help=f"per-checkpoint result cache (default: {CACHE_NAME} beside the first input; "
                             f"FILE.lock beside it guards it against concurrent runs)")
    parser.add_argument("--no-cache", action="store_true", help="score everything, remember nothing")
    parser.add_argument("--format", default="auto", choices=("auto",) + tuple(f for f in FORMATS if f != "lines"),
                        help="--from-nbest file format (lines, which needs a list size, is not for select: convert "
                             "such files first)")
    add_generation_arguments(parser)
    add_scorer_arguments(parser, recorded=True)


def run(args: argparse.Namespace) -> int:
    stopping = check_options(args)
    gold = read_gold(args.gold)
    if args.fairseq_data and not os.path.isdir(args.fairseq_data):
        raise InputError("no such directory (--fairseq-data takes fairseq-preprocess output)", args.fairseq_data)
    inputs, read = list_inputs(args.inputs, args.from_nbest, own_files(args, None if args.no_cache else args.cache))
    cache = None if args.no_cache else (args.cache or os.path.join(_parent(inputs[0]), CACHE_NAME))
    check_select_outputs(args, inputs, read, cache)  # before hours of generation, not after
    check_average(args, inputs)
    check_resampling(args, len(inputs))
    source = nbest_source(args, gold, inputs)
    scorer = source_scorer(args, source)
    report = select_checkpoints(
        inputs, source.gold, scorer, source.generate, key=args.metric,
        maximize=not args.minimize, test=args.paired, n_samples=args.n_samples, seed=args.seed, alpha=args.alpha,
        prefer=args.prefer, stopping=stopping, cache=cache,
        key_of_cache=cache_options(args, source.gold, scorer, source), average=averaging(args), pr_curve=args.pr_curve,
        progress=lambda paths: progress(paths, "checkpoints", "ckpt", leave=True))
    for note in report.warnings:
        print(f"nbest-eval select: warning: {note}", file=sys.stderr)
    write_outputs(args, report)
    if args.json or args.csv:
        sys.stdout.write(report.to_json() if args.json else report.to_csv())
    else:
        sys.stdout.write(report.to_text(text_columns(args, report.keys)))
    if cache:
        print(f"results cached in {cache}", file=sys.stderr)
    return 0


def source_scorer(args: argparse.Namespace, source: Source) -> Scorer:
    """The scorer of the resolved settings (the run's metrics and options), --metric among its keys
    (and with --pr-curve, the curve's measures)."""
    metrics = list(source.settings["metrics"] or DEFAULT_METRICS)
    if args.metric not in metrics:
        metrics.insert(0, args.metric)
    metrics += [key for key in IPREC_KEYS if args.pr_curve and key not in metrics]
    try:
        return Scorer(metrics, **{name: source.settings[name] for name in PARAMS})
    except ValueError as err:  # an unknown metric key
        raise InputError(str(err)) from None


def text_columns(args: argparse.Namespace, scored: List[str]) -> List[str]:
    """The measures the text table shows: --columns, else --metric and the key measures ``scored``."""
    if args.columns == "all":
        return scored
    wanted = [args.metric] + (args.columns.split(",") if args.columns else list(VALIDATION_METRICS))
    unknown = [key for key in wanted if key not in scored]
    if args.columns and unknown:
        raise InputError(f"--columns: {unknown[0]} is not scored; scored: {', '.join(scored)}")
    return [key for key in dict.fromkeys(wanted) if key in scored]


def check_options(args: argparse.Namespace) -> Optional[EarlyStopping]:
    """What the options alone rule out, before anything is read; the early-stopping rule to replay."""
    if args.patience is not None and args.patience < 1:
        raise InputError(f"--patience must be >= 1, got {args.patience}")
    if not 0 < args.alpha < 1:
        raise InputError(f"--alpha must be in (0, 1), got {args.alpha}")
    if (args.stopping or args.stopping_warmup) is not None and args.patience is None:
        raise InputError("--stopping and --stopping-warmup go with --patience P")
    args.minimize = not maximized(args.metric, args.minimize)  # what --average's ranking reads too
    if (args.average is None) != (args.average_out is None):
        raise InputError("--average K and --average-out PATH go together")
    if args.average is not None:
        if args.average < 1:
            raise InputError(f"--average must be >= 1, got {args.average}")
        if args.from_nbest:
            raise InputError("--average averages checkpoints' parameters: not for --from-nbest files")
    if args.patience is None:
        return None
    # the replay's paired bootstrap takes --n-samples too, so that a smaller --alpha is within its reach
    return EarlyStopping(args.metric, args.stopping or DEFAULT_RULE, args.patience, not args.minimize, args.alpha,
                         args.stopping_warmup, n_samples=args.n_samples or BOOTSTRAP_RESAMPLES, seed=args.seed)


def maximized(metric: str, minimize: bool) -> bool:
    """Whether select maximizes ``metric``: as the metric registry says its values are better. A count
    has no better direction, and --minimize of a higher-is-better measure would pick the worst."""
    try:
        higher = higher_is_better(metric)
    except UnknownMetric as err:
        raise InputError(f"--metric: {err}") from None
    if higher is None:
        raise InputError(f"--metric {metric} is a count, not a quality that a checkpoint is better by: select on "
                         f"a measure (e.g. map)")
    if minimize and higher:
        raise InputError(f"--minimize: higher {metric} is better, so minimizing it would pick the worst checkpoint; "
                         f"select takes each measure's direction by itself (lower-is-better: e{{b}})")
    return higher


def check_resampling(args: argparse.Namespace, checkpoints: int) -> None:
    """Before any scoring: the resamples (--n-samples, or enough for Holm over the checkpoints at
    --alpha) must keep their scores within memory; intervals are bootstrap resamples for every test."""
    if args.n_samples:
        n_samples, what = args.n_samples, "--n-samples"
    else:
        n_samples = resamples_for(checkpoints - 1, args.paired, args.alpha) or BOOTSTRAP_RESAMPLES
        what = f"--alpha {args.alpha} over {checkpoints} checkpoints (10 x comparisons / alpha resamples)"
    check_memory(n_samples, checkpoints + 1, what)


def write_outputs(args: argparse.Namespace, report: SelectReport) -> None:
    """--save, --pr-curve and --link-best (to the pick, if it is still the content it was scored as):
    all or none."""
    best = report.pick_path
    if args.link_best and best is None:
        raise InputError(f"--link-best: no checkpoint has a value for --metric {args.metric}, so none is best; "
                         f"nothing written")
    with all_or_nothing():
        if args.save:
            write_table(report.to_table(), args.save, overwrite=args.force)
        if args.pr_curve:
            legends = report.curve_legends()
            draw_curves({legends[name]: curve for name, curve in report.pr_curve.systems.items()}, args.pr_curve,
                        overwrite=args.force)
        how = link_best(best, args.link_best, args.force, report.digests[best]) if args.link_best and best else None
    if how:
        print(f"{args.link_best}: {how} to {report.pick}", file=sys.stderr)


def check_average(args: argparse.Namespace, inputs: List[str]) -> None:
    """--average K needs K checkpoints, and its output a name no checkpoint has (systems are named so)."""
    if not args.average:
        return
    if args.average > len(inputs):
        raise InputError(f"--average {args.average}: there are only {len(inputs)} checkpoints")
    if system_name(args.average_out) in map(system_name, inputs):
        raise InputError(f"--average-out: a checkpoint is already named {system_name(args.average_out)!r}; a system is "
                         f"named by its file or directory name", args.average_out)


def averaging(args: argparse.Namespace) -> Optional[Averaging]:
    """--average K: the K best checkpoints averaged by the framework's own averaging into --average-out."""
    if not args.average:
        return None

    def make(chosen: List[str]) -> str:
        if args.hf:
            from ..hf.averaging import average_checkpoints

            return average_checkpoints(chosen, args.average_out, overwrite=args.force)
        from ..fairseq.averaging import average_checkpoints

        return average_checkpoints(chosen, args.average_out, trust=args.trust_checkpoints, overwrite=args.force)

    return Averaging(args.average, make)


def _parent(path: str) -> str:
    return os.path.dirname(os.path.abspath(os.path.normpath(path)))


def cache_options(args: argparse.Namespace, gold: Gold, scorer: Scorer, source: Source) -> Dict:
    """The score cache's key of this run: its resolved settings and --fairseq-data's files (:func:`cache_key`)."""
    return cache_key(source.settings, gold, scorer, args.fairseq_data)
