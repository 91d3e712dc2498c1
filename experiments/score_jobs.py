#!/usr/bin/env python
"""``nbest-eval score --jobs N`` by N: wall seconds, speedup over the first N, and the serial part.

On bench's large set (:func:`experiments.bench.bench_large`: the gold's prompts ``copies`` times,
with distinct ids, and synthetic ``size``-best lists, as tsv) each N is timed as one whole ``score``
process (start-up, reading, scoring, output), the best of ``repeat``. The serial part is what the
workers cannot share: the seconds before they are started (start-up, the gold, the file's first
lines) plus those after the last part is merged (the sums, the output, the exit), from timestamps
that the process takes around the workers' start and the merge (None with one process, which is
all serial). ``code`` runs another checkout's nbest_eval (a baseline) on the same set.

    python -m experiments.score_jobs [--gold PATH] [--jobs 1,2] [--copies 4] [--size 1000] [--repeat 1]
                                     [--code DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from experiments.bench import DEFAULT_GOLD, synthetic_nbest
from nbest_eval import Gold, GoldPrompt
from nbest_eval.formats import read_gold, write_gold, write_nbest
from nbest_eval.processes.workers import available_cores

METRICS = "map,wf1,bleu_100x100"

#: run in the timed process: ``score`` with timestamps when the workers are started and the merge ends
CHILD = """
import json, sys, time
import nbest_eval.processes.workers as workers
from nbest_eval.cli import main

marks = {}

def marked(name, function):
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            marks[name] = time.time()
    return run

workers._start = marked("started", workers._start)
for name in ("_by_parts", "_each_reading"):  # the merge of the workers' parts (_each_reading: before parts)
    if hasattr(workers, name):
        setattr(workers, name, marked("merged", getattr(workers, name)))
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as out:
        json.dump(marks, out)
sys.exit(code)
"""


def large_set(gold: Union[str, Gold], workdir: Path, copies: int, size: int) -> Tuple[Path, Path, int]:
    """bench_large's set made from ``gold`` (or the gold file at that path), written to ``workdir``:
    (gold file, n-best tsv, prompts)."""
    gold = read_gold(gold) if isinstance(gold, str) else gold
    big = Gold([GoldPrompt(f"{p.id}_{k}", f"{p.text} ({k})", p.translations) for k in range(copies) for p in gold])
    gold_file, nbest_file = workdir / "large.gold.txt", workdir / "large.tsv"
    write_gold(big, gold_file, overwrite=True)
    write_nbest(synthetic_nbest(big, size), nbest_file, "tsv", overwrite=True)
    return gold_file, nbest_file, len(big)


def timed_score(gold_file: Path, nbest_file: Path, jobs: int, code: Optional[str]) -> Dict[str, Any]:
    """One ``score --jobs`` process: its values, wall seconds, serial seconds and CPU seconds (user +
    system, its workers' included: the work done, whatever else runs on the machine)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as marks_file:
        argv = ["score", "--gold", str(gold_file), "--nbest", str(nbest_file), "--format", "tsv",
                "--metrics", METRICS, "--json", "--jobs", str(jobs)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))}
        before, start = _children_cpu(), time.time()
        result = subprocess.run([sys.executable, "-c", CHILD, marks_file.name, *argv], capture_output=True,
                                text=True, env=env, cwd=gold_file.parent)  # not this checkout's nbest_eval first
        end, cpu = time.time(), _children_cpu() - before
        if result.returncode:
            raise RuntimeError(f"score --jobs {jobs} failed: {result.stderr.strip()[-2000:]}")
        marks = json.load(marks_file)
    serial = None if "started" not in marks else (marks["started"] - start) + (end - marks["merged"])
    return {"values": json.loads(result.stdout), "wall_s": end - start, "serial_s": serial, "cpu_s": cpu}


def _children_cpu() -> float:
    """CPU seconds of the finished child processes, and of theirs that they waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def curve(workdir, jobs: Sequence[int] = (1, 2), copies: int = 4, size: int = 1000, gold: Optional[str] = None,
          repeat: int = 1, code: Optional[str] = None) -> Dict[str, Any]:
    """The curve on bench's large set made in ``workdir``: a row per job count (wall seconds, speedup
    over the first count, serial seconds, CPU seconds, values identical to the first count's)."""
    gold_file, nbest_file, prompts = large_set(gold or str(DEFAULT_GOLD), Path(workdir), copies, size)
    rows = []
    for n in jobs:
        runs = [timed_score(gold_file, nbest_file, n, code) for _ in range(repeat)]
        best = min(runs, key=lambda run: run["wall_s"])
        rows.append({"jobs": n, "wall_s": round(best["wall_s"], 3),
                     "serial_s": None if best["serial_s"] is None else round(best["serial_s"], 3),
                     "cpu_s": round(best["cpu_s"], 3),
                     "values": best["values"]})
    first = rows[0]["values"]
    for row in rows:
        row["speedup"] = round(rows[0]["wall_s"] / row["wall_s"], 3)
        row["identical"] = row.pop("values") == first
    return {"prompts": prompts, "size": size, "file_mb": round(nbest_file.stat().st_size / 2 ** 20, 1),
            "cores": available_cores(), "code": code or "this checkout", "rows": rows}


def job_counts(text: str) -> Tuple[int, ...]:
    try:
        counts = tuple(int(word) for word in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--jobs: expected job counts >= 1 separated by commas, like 1,2,4; "
                                         f"got {text!r}")
    return counts


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.score_jobs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gold", default=os.environ.get("NBEST_EVAL_STAPLE_GOLD", str(DEFAULT_GOLD)),
                        help="STAPLE gold whose prompts are copied (default: the en_pt dev gold)")
    parser.add_argument("--jobs", type=job_counts, default=(1, 2), help="job counts, like 1,2,4 (default: 1,2)")
    parser.add_argument("--copies", type=int, default=4, help="copies of the gold's prompts (default: %(default)s)")
    parser.add_argument("--size", type=int, default=1000, help="hypotheses per prompt (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per job count; the fastest is kept")
    parser.add_argument("--code", help="a checkout whose nbest_eval is timed instead (a baseline)")
    parser.add_argument("--out", help="also write the results as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        found = curve(workdir, args.jobs, args.copies, args.size, args.gold, args.repeat, args.code)
    text = json.dumps(found, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
