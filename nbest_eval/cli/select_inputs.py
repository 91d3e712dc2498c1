"""``nbest-eval select``'s inputs and outputs: what the patterns and folders find, and the one rule
for "is this path an input of this run".

Every file that a pattern or folder finds, or that is named, is an input of the run, however it was
found: an output that is one of them is refused, even with --force (replacing it would lose a
checkpoint or an n-best file). The only files found that are not inputs are the run's own: the gold
(read as the gold, never as a system), fairseq's aliases and second names of one file (scored once,
under the first name), and an output of an earlier run at the very name this run writes to, when
its content shows it is one: the --link-best link (a link), the --save table (a select table) and the
--cache (a select cache). Nothing else is ever left out: an --average-out among the files found is
refused, since a checkpoint cannot show that it is an earlier average.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..analysis.systems import read_table
from ..data import InputError
from ..files.writable import check_link, check_model_directory, check_outputs, file_identity
from ..selection.checkpoint_files import checkpoint_order, drop_aliases, is_select_cache
from ..selection.report import system_name
from .common import check_inputs

NBEST_SUFFIXES = (".tsv", ".jsonl", ".txt", ".out")
#: the HF callback's name for a later list of a step already saved: STEM-N.suffix
_REPEATED = re.compile(r"((?:.+-)?nbest-step(\d+))-\d+(\.[a-z]+)")


def own_files(args: argparse.Namespace, cache: Optional[str]) -> Dict[str, Optional[str]]:
    """The run's own files by option: the gold and every output."""
    return {"--gold": args.gold, "--save": args.save, "--cache": cache, "--link-best": args.link_best,
            "--average-out": args.average_out}


def list_inputs(patterns: Sequence[str], files: bool, own: Mapping[str, Optional[str]] = {}
                ) -> Tuple[List[str], List[str]]:
    """(the systems, every input): globs (quoted ones the shell left alone) and directories of n-best
    files expanded; the systems in training order, without fairseq's aliases, second names (links,
    hard links) of one file and the run's ``own`` files (:func:`earlier_output`); every input: all
    that was found or named but those own files, which no output may replace."""
    named, found = [], []  # named: given as they are, so never left out (an own file among them is refused)
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches or not os.path.exists(matches[0]):
            raise InputError("no such file or directory", pattern)
        for match in matches:
            if files and os.path.isdir(match):
                found += [os.path.join(match, f) for f in os.listdir(match) if _is_nbest_file(match, f)]
            else:
                (named if match == pattern else found).append(match)
    found = [path for path in found if not any(earlier_output(path, option, out) for option, out in own.items())]
    found = [path for path in found if not repeated_evaluation(path, found)]
    paths = _distinct(checkpoint_order(drop_aliases(named + found)))
    if not paths:
        raise InputError(f"nothing to score in {' '.join(patterns)}")
    names = [system_name(p) for p in paths]
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated:
        raise InputError(f"two inputs are named {repeated!r}; a system is named by its file or directory name")
    return paths, list(dict.fromkeys(named + found))


def repeated_evaluation(path: str, found: Sequence[str]) -> bool:
    """Whether ``path`` is the Hugging Face callback's second list of a step (``nbest-step400-2.jsonl``
    beside ``nbest-step400.jsonl``): what ``trainer.evaluate()`` after training writes for the model
    it loaded (the best one, named after the last step), not another checkpoint. Said on stderr."""
    match = _REPEATED.fullmatch(os.path.basename(path))
    if not match or os.path.join(os.path.dirname(path), match.group(1) + match.group(3)) not in found:
        return False
    print(f"nbest-eval select: leaving out {path}: a second evaluation at step {match.group(2)} (the HF callback's "
          f"name for one after training, of the loaded best model); name the file to score it", file=sys.stderr)
    return True


def earlier_output(path: str, option: str, own: Optional[str]) -> bool:
    """Whether ``path``, found by a pattern or a folder, is the run's own file ``own`` (``option``'s)
    rather than an input: any name of the gold; the very entry an output is written to, when its
    content shows it is such an output. An --average-out never is: it is refused as an input."""
    if not own or file_identity(path) is None:
        return False
    if option == "--gold":
        return file_identity(path) == file_identity(own)
    if file_identity(path, follow=False) != file_identity(own, follow=False):
        return False  # another entry: writing ``own`` replaces that entry, not ``path``
    if option == "--link-best":
        return os.path.islink(path)
    if option == "--save":
        return not os.path.islink(path) and _is_select_table(path)
    if option == "--cache":
        return not os.path.islink(path) and is_select_cache(path)
    return False


def _is_select_table(path: str) -> bool:
    """A table that ``select --save`` writes: every system with a verdict (its ``tied`` note)."""
    try:
        table = read_table(path)
    except InputError:
        return False
    return bool(table.systems) and all("tied" in s.notes for s in table.systems)


def check_select_outputs(args: argparse.Namespace, systems: List[str], inputs: List[str],
                         cache: Optional[str]) -> None:
    """Refuse now what would be refused at the end, or go wrong: a --pr-curve on standard output;
    --save, --pr-curve, --link-best, --average-out or --cache in a missing or unwritable folder,
    naming one file, or naming an input (any file found or named, see :func:`list_inputs`); an
    existing --save, --pr-curve or --average-out without --force, a --link-best that is not a link,
    a --cache that is no select cache, and an --average-out (a model directory for Hugging Face)
    that holds another output."""
    check_inputs({"--gold": args.gold, "CHECKPOINT": systems})
    read = [args.gold] + inputs
    outputs = {"--save": args.save, "--pr-curve": args.pr_curve, "--link-best": args.link_best, "--cache": cache}
    if args.average_out and not args.hf:
        outputs["--average-out"] = args.average_out
    check_outputs(outputs, read, args.force, updated={"--cache"}, figures={"--pr-curve"})
    if args.average_out and args.hf:  # a model directory, which check_outputs does not take
        check_model_directory("--average-out", args.average_out, read, args.force, outputs)
    if args.link_best:
        check_link("--link-best", args.link_best, args.force)
    if cache and os.path.lexists(cache) and not is_select_cache(cache):
        raise InputError("--cache: exists and is not a select cache; refusing to adopt or replace it "
                         "(pass another --cache, or --no-cache)", cache)


def _distinct(paths: List[str]) -> List[str]:
    """One path per file (a real name before a link), so no system is scored twice under two names."""
    first: Dict = {}
    for path in sorted(paths, key=os.path.islink):
        first.setdefault(file_identity(path), path)
    for path in paths:
        if first[file_identity(path)] != path:
            print(f"nbest-eval select: leaving out {path}: the same file as {first[file_identity(path)]}",
                  file=sys.stderr)
    return [p for p in paths if first[file_identity(p)] == p]


def _is_nbest_file(folder: str, name: str) -> bool:
    """In a directory of n-best files: .tsv, .jsonl, .txt or .out files, but not gold files
    (``*gold.txt``, as STAPLE and the plugin's --nbest-save-dir name them) or hidden ones."""
    return (os.path.isfile(os.path.join(folder, name)) and not name.startswith(".")
            and name.endswith(NBEST_SUFFIXES) and not name.endswith("gold.txt"))
