"""``nbest-eval select``'s n-best lists and what they are scored with.

Checkpoints are generated and scored as their run validated: with the settings it recorded
(:mod:`nbest_eval.selection.run_settings`: a fairseq checkpoint's task config, the file the Hugging Face
callback saves beside a checkpoint), an option given overriding them (said on stderr), and for the
prompts it validated on (the others are not scored: the run never saw them). n-best files
(``--from-nbest``) are scored against every gold prompt, a prompt without a list as an empty list.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence

from ..data import Gold, InputError, NBest
from ..formats import read_nbest
from ..scorer import parse_metric_list
from ..selection.report import system_name
from ..selection.run_settings import FAIRSEQ, NONE, SCORER, Resolved, describe, resolve
from ..training.generation import DECLARED
from . import common
from .common import positive_int, progress


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that override what a checkpoint's run recorded (default: the run's)."""
    group = parser.add_argument_group(
        "generation (checkpoints; default: what the run recorded; a value given overrides it, and select says so)")
    for setting in DECLARED.values():
        group.add_argument(setting.option, type=setting.type, help=setting.help)
    group.add_argument("--batch-size", type=positive_int,
                       help="HF: at most this many prompts a generation batch (default: the run's, else "
                            "NBestEvalCallback's); fairseq batches as the run validated")
    group.add_argument("--batch-tokens", type=positive_int,
                       help="HF: prompts x beam x longest source (tokens) a generation batch holds at most, "
                            "with the run's --batch-size if it recorded one (default: the run's, else "
                            "NBestEvalCallback's: chosen on the device); fairseq batches as the run validated")
    group.add_argument("--remove-bpe", help=f"fairseq: e.g. sentencepiece, subword_nmt, or {NONE}")
    group.add_argument("--detok", help="fairseq detokenizer: space (none), moses, ...")
    group.add_argument("--prompt-map", choices=("id", "order"), help="how sources find their gold prompts")
    group.add_argument("--max-prompts", help=f"fairseq: score the first N prompts of the split, or {NONE} (all)")
    group.add_argument("--subset", help="fairseq: the split of DATA_BIN the run validated on (the run's, else valid)")
    group.add_argument("--tokenizer", help="HF: tokenizer directory (default: each checkpoint's own)")
    group.add_argument("--trust-checkpoints", action="store_true",
                       help="fairseq: load checkpoints that torch's safe loader refuses, with full unpickling, "
                            "which can run code stored in them: only for checkpoints you made")


@dataclass
class Source:
    """What select scores: ``gold`` (the prompts scored), ``settings`` (generation and scorer
    settings by name, plain JSON: they key the cache) and ``generate`` (path -> n-best lists)."""

    gold: Gold
    settings: Dict[str, Any]
    generate: Callable[[str], NBest]


def nbest_source(args: argparse.Namespace, gold: Gold, inputs: Sequence[str]) -> Source:
    """The lists of ``inputs``, the prompts and the settings to score them with (see the module docstring)."""
    if args.from_nbest:
        scorer = resolve(SCORER, [], _given(args, SCORER)).values
        return Source(gold, {"format": args.format, **scorer}, _file_lists(args, gold))
    if args.hf:
        return _hf_source(args, gold, inputs)
    return _fairseq_source(args, gold, inputs)


def _fairseq_source(args: argparse.Namespace, gold: Gold, inputs: Sequence[str]) -> Source:
    from ..fairseq import checkpoints

    records = [(path, checkpoints.recorded_settings(checkpoints.read_checkpoint(path, args.trust_checkpoints)))
               for path in progress(inputs, "reading the runs' settings", "ckpt", leave=True)]
    settings = _resolved(FAIRSEQ, records, args, checkpoints.WHY_MISSING)
    generation = {name: settings[name] for name in (s.name for s in FAIRSEQ)}
    scored = checkpoints.validated_gold(inputs[0], gold, data=args.fairseq_data, settings=generation,
                                        trust=args.trust_checkpoints)
    _say_prompts(scored, gold)
    said = set()

    def say_once(message: str) -> None:  # the same for every checkpoint of one run
        if message not in said:
            said.add(message)
            _say(message)

    def generate(path: str) -> NBest:
        with_none = {k: NONE if v is None else v for k, v in generation.items()}
        return checkpoints.checkpoint_nbest(path, gold, data=args.fairseq_data, trust=args.trust_checkpoints,
                                            progress=_prompt_bar(path), warn=say_once, **with_none)

    return Source(scored, settings, generate)


def _hf_source(args: argparse.Namespace, gold: Gold, inputs: Sequence[str]) -> Source:
    from ..hf import checkpoints

    records = [(path, checkpoints.recorded_settings(path)) for path in inputs]
    settings = _resolved(checkpoints.SETTINGS, records, args, checkpoints.WHY_MISSING)
    scored = checkpoints.validated_gold(gold, settings["prompts"])
    _say_prompts(scored, gold)
    generation = {s.name: settings[s.name] for s in checkpoints.SETTINGS if s.name != "prompts"}

    def generate(path: str) -> NBest:
        return checkpoints.checkpoint_nbest(path, scored, tokenizer=args.tokenizer, progress=_prompt_bar(path),
                                            **generation)

    return Source(scored, {**settings, "tokenizer": args.tokenizer}, generate)


def _resolved(generation, records, args: argparse.Namespace, why_missing: str) -> Dict[str, Any]:
    """Generation and scorer settings from ``records`` and the options; the notes and the settings on stderr."""
    given = _given(args, tuple(generation) + SCORER)
    resolved: Resolved = resolve(tuple(generation) + SCORER, records, given, why_missing)
    for note in resolved.notes:
        _say(note)
    options = [s.name for s in generation if given.get(s.name) is not None]
    if not resolved.source:
        source = "as given"
    elif options:
        source = f"with {resolved.source}'s recorded settings and your options"
    else:
        source = f"as {resolved.source}'s run recorded"
    _say(f"generating {source}: {describe(resolved.values, generation, options)}")
    return resolved.values


def _given(args: argparse.Namespace, settings) -> Dict[str, Any]:
    """The options given, by setting name (None: not given)."""
    given = {s.name: getattr(args, s.name, None) for s in settings}
    if given.get("metrics") is not None:
        given["metrics"] = parse_metric_list(given["metrics"])
    if given.get("max_prompts") not in (None, NONE):
        given["max_prompts"] = _count(given["max_prompts"])
    return given


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise InputError(f"--max-prompts: expected a number >= 1 or {NONE}, got {text!r:.40}")
    return int(text)


def _say_prompts(scored: Gold, gold: Gold) -> None:
    if len(scored) != len(gold):
        _say(f"scoring the {len(scored)} prompts the run validated on, of {len(gold)} in the gold")


def _file_lists(args: argparse.Namespace, gold: Gold) -> Callable[[str], NBest]:
    """An n-best file's lists; the gold prompts it has none for are said, and count as empty lists."""

    def lists(path: str) -> NBest:
        nbest = read_nbest(path, gold, args.format)
        empty = sum(1 for prompt in gold.ids() if not nbest.get(prompt))
        if empty:
            _say(f"{system_name(path)}: {empty} of {len(gold)} gold prompts have no hypotheses and count as empty "
                 f"lists, as docs/metrics.md scores them (mostly 0, but e{{b}} 1, and F1 (left out with --wf1-nil "
                 f"skip) and the truncation-aware measures 1 where no translation is valid); to score only the "
                 f"prompts a run validated on, give the gold it validated against (the plugin's --nbest-save-dir "
                 f"holds it)")
        return nbest

    return lists


def _say(message: str) -> None:
    print(f"nbest-eval select: {message}", file=sys.stderr)


def _prompt_bar(path: str) -> Optional[Callable[[int], Any]]:
    """A factory of bars counting one checkpoint's prompts as they are generated."""
    if not common.progress_shown():
        return None
    from tqdm import tqdm

    return lambda total: tqdm(total=total, desc=system_name(path), unit="prompt", delay=common.PROGRESS_DELAY_S,
                              leave=False)
