"""The GPU check (docs/gpu.md): one command that reruns on the machine at hand what the GPU issue measured
by hand, and writes one JSON file (check.json) and one markdown table (check.md) into OUT, both rewritten
after every row, so that a check cut short keeps what it finished.

    python -m scripts.gpu_check --data .gpu-data/en_pt --out OUT [--budget 450] [--modes loop,off,async]
    python -m scripts.gpu_check --smoke --out OUT     # every part at toy size (the default without CUDA)

Parts, in this order, each given its share of --budget (seconds; what a part leaves goes to the next):
  runs     scripts.staple_en_pt, HF and fairseq, a few epochs on the device: wall time and the share of it
           that n-best validation held up (--nbest-mode loop); then, while budget remains, the same
           runs with --nbest-mode off and async (the sidecar on the same device)
  matrix   experiments.generation_matrix on the HF run's last checkpoint: model dtype x beam search
  batches  the HF evaluator's generation time by batch_size and by batch_tokens
  beams    generation, the scoring beside it and the overhead, by beam size
  jobs     experiments.score_jobs: `nbest-eval score --jobs N` by N
matrix, batches and beams need the runs part's HF loop run in the same call. A part or row that fails
is recorded with its error, the check goes on and exits 1; a run that would not fit the time left is
skipped with a note. --work must be new or empty: a run is never taken from an earlier check. The
machine (GPU, versions, CPU cores, the commit) heads the JSON and every table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from experiments.generation_matrix import WEIGHTS, matrix, synchronize
from experiments.staple.settings import DEFAULT_DATA, DEV_GOLD, METRICS
from nbest_eval.data import InputError
from nbest_eval.training.devices import resolve_device

REPO = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("hf", "fairseq")
MODES = ("loop", "off", "async")
#: each part's share of the budget, in running order
SHARES = {"runs": 0.45, "matrix": 0.2, "batches": 0.1, "beams": 0.1, "jobs": 0.15}


@dataclass(frozen=True)
class Sizes:
    """How big each part is: the full check on a GPU, or toy sizes for the CPU."""

    epochs: int
    train_prompts: Optional[int]  # None: all
    valid_prompts: Optional[int]
    vocab_size: int
    beam: int  # the runs', the matrix's and the batch sizes' beam
    beams: Tuple[int, ...]
    batch_sizes: Tuple[int, ...]
    batch_tokens: Tuple[int, ...]  # besides the evaluator's default for the device
    jobs: Tuple[int, ...]  # 1 first (the base of the speedups), then the most cores: the target
    copies: int  # the --jobs set: copies of the gold's prompts, each with a size-best list
    size: int


FULL = Sizes(epochs=4, train_prompts=None, valid_prompts=None, vocab_size=2000, beam=16, beams=(16, 64, 100),
             batch_sizes=(32, 64, 128), batch_tokens=(16384, 65536, 262144), jobs=(1, 16, 8, 4, 2),
             copies=4, size=1000)
SMOKE = Sizes(epochs=2, train_prompts=40, valid_prompts=8, vocab_size=300, beam=4, beams=(2, 4),
              batch_sizes=(2, 8), batch_tokens=(64,), jobs=(1, 2), copies=1, size=20)


class NoRun(RuntimeError):
    """A part that needs a run the check has not got: its message says it all (no traceback kept)."""


class Stopped(BaseException):
    """SIGTERM (a wall-clock limit): ends the check, not just the part it is in."""


def stop(signum: int, frame: Any) -> None:
    raise Stopped(f"signal {signum}")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] gpu_check: {message}", flush=True)


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:500]


# -- the check: parts, budget, incremental results ------------------------------------------------


@dataclass
class Check:
    """The results so far, written to OUT/check.json and OUT/check.md after every change."""

    out: Path
    budget: float
    header: Dict[str, Any]
    parts: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def save(self) -> None:
        data = {**self.header, "elapsed_s": round(time.monotonic() - self.started, 1), "parts": self.parts}
        write_atomically(self.out / "check.json", json.dumps(data, indent=2, default=str) + "\n")
        write_atomically(self.out / "check.md", markdown(data))

    def run(self, name: str, rows: Callable[[Callable[[], float]], Iterator[Dict]], allowance: float) -> None:
        """Part ``name``: every row its generator yields, saved as it comes, within ``allowance``
        seconds (the generator gets a function giving the seconds left to it); an exception ends the
        part with its error recorded, the rows before it kept, and a row with an error fails the part
        once its rows are done."""
        start = time.monotonic()
        part = self.parts[name] = {"status": "running", "allowance_s": round(allowance, 1), "rows": []}
        log(f"{name}: started, {allowance:.0f} s of {self.left():.0f} s left")
        self.save()
        try:
            for row in rows(lambda: allowance - (time.monotonic() - start)):
                part["rows"].append(row)
                log(f"{name}: {json.dumps(row, default=str)[:300]}")
                self.save()
            failed = sum("error" in row for row in part["rows"])  # a run whose command failed, a beam out of memory
            part["status"] = "error" if failed else "done"
            if failed:
                part["error"] = f"{failed} of {len(part['rows'])} rows failed"
        except (Exception, SystemExit) as err:  # noqa: BLE001 - the check goes on to the next part
            part.update(status="error", error=error_text(err))
            if not isinstance(err, NoRun):
                part["traceback"] = traceback.format_exc()[-2000:]
            log(f"{name}: failed: {error_text(err)}")
        part["seconds"] = round(time.monotonic() - start, 1)
        log(f"{name}: {part['status']} in {part['seconds']:.0f} s")
        self.save()

    def skip(self, name: str, why: str) -> None:
        self.parts[name] = {"status": "skipped", "note": why, "rows": []}
        log(f"{name}: skipped: {why}")
        self.save()


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def run_parts(check: Check, parts: Sequence[Tuple[str, Callable]], shares: Dict[str, float]) -> None:
    """Each part in turn, given its share of the budget left (what earlier parts left unspent included)."""
    for i, (name, rows) in enumerate(parts):
        left = check.left()
        if left <= 1:
            check.skip(name, "the budget is spent")
            continue
        check.run(name, rows, left * shares[name] / sum(shares[n] for n, _ in parts[i:]))


# -- the machine ----------------------------------------------------------------------------------


def version(distribution: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine(device: str) -> Dict[str, Any]:
    """What the figures were measured on."""
    import torch

    import nbest_eval

    found = {"device": device, "gpu": None, "gpu_memory_gib": None, "cpu_cores": os.cpu_count(),
             "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
             "torch": torch.__version__, "cuda": torch.version.cuda,
             "transformers": version("transformers"), "fairseq": version("fairseq-fixed") or version("fairseq"),
             "nbest_eval": nbest_eval.__version__, "commit": commit()}
    if device == "cuda":
        try:
            props = torch.cuda.get_device_properties(0)
            found.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2 ** 30, 1))
        except RuntimeError as err:  # the check goes on: each part will say what fails
            found["gpu"] = f"unknown ({error_text(err)})"
    return found


def commit() -> Optional[str]:
    """The checkout's commit, "-dirty" when the working tree differs from it (a copied tree whose .git
    lags it), since HEAD alone would name code the figures did not come from."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def label(machine_info: Dict[str, Any]) -> str:
    """The machine in a few words, for every table."""
    where = machine_info.get("gpu") or f"CPU only ({machine_info.get('cpu')})"
    return (f"{where}, {machine_info.get('cpu_cores')} CPU cores; torch {machine_info.get('torch')}"
            f"{' + CUDA ' + machine_info['cuda'] if machine_info.get('gpu') and machine_info.get('cuda') else ''}, "
            f"transformers {machine_info.get('transformers')}, fairseq {machine_info.get('fairseq')}")


# -- the markdown ---------------------------------------------------------------------------------


def markdown(data: Dict[str, Any]) -> str:
    """check.json as tables: one per part, each labelled with the machine."""
    where = label(data["machine"])
    lines = [f"# GPU check ({'smoke, toy sizes' if data['smoke'] else 'full'})", "",
             f"Machine: {where}. Commit {data['machine'].get('commit')}; started {data['started']}; "
             f"budget {data['budget_s']:.0f} s, {data['elapsed_s']:.0f} s elapsed.", ""]
    for name, part in data["parts"].items():
        lines += [f"## {name} ({where})", "", f"{part['status']}"
                  + (f" in {part['seconds']:.0f} s" if "seconds" in part else "")
                  + (f" (of {part['allowance_s']:.0f} s allowed)" if "allowance_s" in part else "")
                  + (f": {part['note']}" if "note" in part else "")
                  + (f": {part['error']}" if "error" in part else ""), ""]
        lines += table(part["rows"]) + (mode_costs(part["rows"]) if name == "runs" else [])
    return "\n".join(lines) + "\n"


def mode_costs(rows: Sequence[Dict]) -> List[str]:
    """Per framework, the training command's wall time in each n-best mode, and what loop and async
    add to off's."""
    lines = []
    for framework in FRAMEWORKS:
        seconds = {r["mode"]: r["training_s"] for r in rows if r.get("framework") == framework and r.get("training_s")}
        if len(seconds) < 2:
            continue
        off = seconds.get("off")
        lines.append(f"- {framework}: " + ", ".join(
            f"{mode} {seconds[mode]:.1f} s" + (f" ({seconds[mode] / off - 1:+.1%} over off)" if off and mode != "off"
                                               else "") for mode in MODES if mode in seconds))
    return ["Training wall time by n-best mode:", ""] + lines + [""] if lines else []


def table(rows: Sequence[Dict]) -> List[str]:
    """A markdown table of ``rows``: a column for every key, in the order first seen."""
    if not rows:
        return []
    keys = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(row.get(key)) for key in keys) + " |" for row in rows]
    return lines + [""]


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|").replace("\n", " ")[:200]


# -- part 1: the real runs -----------------------------------------------------------------------


@dataclass
class Context:
    """What the parts share: the settings, where runs go, and the HF run's model once loaded."""

    data: Path
    device: str
    sizes: Sizes
    frameworks: Tuple[str, ...]
    modes: Tuple[str, ...]
    work: Path
    out: Path
    runs: Dict[str, Path] = field(default_factory=dict)  # "hf-loop": its finished run directory
    _hf: Any = None


def staple_command(ctx: Context, framework: str, mode: str, out: Path) -> List[str]:
    s = ctx.sizes
    command = [sys.executable, "-m", "scripts.staple_en_pt", "--data", str(ctx.data), "--out", str(out),
               "--framework", framework, "--nbest-mode", mode, "--epochs", str(s.epochs), "--beam", str(s.beam),
               "--vocab-size", str(s.vocab_size), "--device", ctx.device, "--precision", "fp32", "--no-analysis"]
    for option, value in (("--train-prompts", s.train_prompts), ("--valid-prompts", s.valid_prompts)):
        if value is not None:
            command += [option, str(value)]
    return command  # async: the sidecar on the training device, staple_en_pt's default


def run_command(command: Sequence[str], logfile: Path, timeout: float) -> Tuple[Optional[int], float]:
    """(exit status, None if stopped at ``timeout``; seconds). The command and its children (the
    sidecar, fairseq's workers) run in their own process group, stopped together."""
    start = time.monotonic()
    with open(logfile, "wb") as sink:
        process = subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code: Optional[int] = process.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            code = None
            stop_group(process)
        except BaseException:  # the check itself stopped (Stopped, ^C): not the run's children left behind
            stop_group(process)
            raise
    return code, time.monotonic() - start


def stop_group(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def run_row(framework: str, mode: str, summary: Dict, seconds: float) -> Dict:
    """A run's row: its wall time and, from summary.json, the time its n-best validation took."""
    rows, clock = summary.get("validations", []), summary.get("timing", {})
    training = clock.get("training_seconds")
    row = {"framework": framework, "mode": mode, "device": summary.get("device"),
           "precision": summary.get("precision"), "epochs": clock.get("epochs_trained"),
           "valid_prompts": summary.get("valid_prompts"), "beam": summary.get("beam"),
           "max_tokens_valid": summary.get("max_tokens_valid"),
           "command_s": round(seconds, 1), "training_s": training}
    if mode == "off":
        return row
    gen, overhead = clock.get("generation_seconds"), clock.get("overhead_seconds")
    row.update(validations=len(rows), gen_s=gen, score_s=clock.get("score_seconds"), overhead_s=overhead,
               gen_per_validation_s=[round(min(r["gen_seconds"] for r in rows), 2),
                                     round(max(r["gen_seconds"] for r in rows), 2)] if rows else None,
               map_last=rows[-1]["map"] if rows else None)
    if mode == "loop" and training and gen is not None:
        row["validation_share"] = round((gen + (overhead or 0.0)) / training, 3)  # scoring runs beside generation
    if mode == "async":
        row.update(lag_mean_s=clock.get("lag_seconds", {}).get("mean"),
                   lag_max_s=clock.get("lag_seconds", {}).get("max"))
    return row


def part_runs(ctx: Context, left: Callable[[], float]) -> Iterator[Dict]:
    """Each mode in turn, each framework in it; a run that its framework's loop run says will not fit
    the time left is skipped."""
    needed: Dict[str, float] = {}
    for mode in ctx.modes:
        for framework in ctx.frameworks:
            name = f"{framework}-{mode}"
            if needed.get(framework, 0) > left():
                yield {"framework": framework, "mode": mode,
                       "skipped": f"about {needed[framework]:.0f} s needed, {max(left(), 0):.0f} s left"}
                continue
            out = ctx.work / name
            code, seconds = run_command(staple_command(ctx, framework, mode, out), ctx.work / f"{name}.log", left())
            needed.setdefault(framework, seconds)
            yield finished_run(ctx, framework, mode, out, code, seconds)


def finished_run(ctx: Context, framework: str, mode: str, out: Path, code: Optional[int], seconds: float) -> Dict:
    """A run's row, its summary.json and log tail kept in OUT/runs (written before its analysis, the
    summary may be there even when the command was stopped); a run that failed gives no checkpoint
    to the later parts."""
    name = f"{framework}-{mode}"
    kept = ctx.out / "runs"
    kept.mkdir(exist_ok=True)
    log_tail = (ctx.work / f"{name}.log").read_text(encoding="utf-8", errors="replace")[-3000:]
    (kept / f"{name}.log.txt").write_text(log_tail, encoding="utf-8")
    summary_path = out / "summary.json"  # this run's: --work held no run before the check
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else None
    row = run_row(framework, mode, summary, seconds) if summary else {"framework": framework, "mode": mode,
                                                                       "command_s": round(seconds, 1)}
    if summary:
        shutil.copy(summary_path, kept / f"{name}.summary.json")
        if summary.get("validations") and code in (0, None):  # stopped at the deadline: what it validated
            ctx.runs[name] = out
    if code != 0:
        row["error"] = ("stopped at the part's time limit" if code is None else f"exit status {code}") + \
            f"; log: runs/{name}.log.txt: " + log_tail[-300:]
    return row


# -- parts 2-4: generation from the HF run's last checkpoint -------------------------------------


@dataclass
class HFModel:
    model: Any
    tokenizer: Any
    gold_path: str
    prompts: str
    checkpoint: str
    options: Dict[str, Any]  # the run's validation settings (length bound, batches, generate's kwargs)


def hf_model(ctx: Context) -> HFModel:
    """The HF loop run's last checkpoint on the device, loaded once and warmed up."""
    if ctx._hf is None:
        from experiments.staple.selection import generation
        from nbest_eval.hf.checkpoints import load_model

        out = ctx.runs.get("hf-loop")
        if out is None:
            raise NoRun("no finished HF loop run to take a checkpoint from: see the runs part's rows")
        summary = json.loads((out / "summary.json").read_text())
        checkpoint = summary["validations"][-1]["checkpoint"]
        model, tokenizer = load_model(checkpoint, ctx.device)
        ctx._hf = HFModel(model, tokenizer, summary["valid_gold"], str(out / "data" / "valid.src"), checkpoint,
                          generation(summary, out, 1))
        timed_generation(ctx, evaluator(ctx, max_prompts=4))  # CUDA context and kernels, before any timing
    return ctx._hf


def evaluator(ctx: Context, **settings: Any):
    """An NBestEvaluator with the HF run's validation settings (its length bound and its batch_size:
    None where the run left batches to the evaluator on the device) at the check's beam, ``settings``
    over them."""
    from nbest_eval.hf.evaluator import NBestEvaluator

    hf, beam = ctx._hf, ctx.sizes.beam
    given = dict(num_beams=beam, num_return_sequences=beam, max_new_tokens=None, batch_size=hf.options["batch_size"],
                 max_len_a=hf.options["max_len_a"], max_len_b=hf.options["max_len_b"],
                 generation_kwargs=hf.options["generation_kwargs"], metrics=list(METRICS))
    return NBestEvaluator(hf.gold_path, hf.tokenizer, hf.prompts, **{**given, **settings})


def timed_generation(ctx: Context, ev) -> Tuple[List[List[str]], float]:
    """(each prompt's list of texts, seconds) of ``ev.generate`` on the HF model."""
    synchronize(ctx.device)
    start = time.perf_counter()
    lists = ev.generate(ctx._hf.model)
    synchronize(ctx.device)
    return [[hyp.text for hyp in hyps] for hyps in lists], time.perf_counter() - start


def resolved_batches(ev) -> Dict[str, Any]:
    """The batch settings the evaluator used (resolved on the device at its first generation)."""
    return {"batch_size": getattr(ev, "batch_size", None), "batch_tokens": getattr(ev, "batch_tokens", None),
            "batches": len(ev.batches())}


def run_batches(options: Dict[str, Any], device: str) -> Tuple[Optional[int], Optional[int]]:
    """(batch_size, batch_tokens) of the HF run's validations: its recipe's prompts a batch, or where
    it left them to the evaluator (on a GPU), the device's default, given explicitly (the matrix
    sizes a batch before it has a model to size them on)."""
    from nbest_eval.hf.evaluator import device_batching

    return (options["batch_size"], None) if options["batch_size"] else device_batching(device)


def part_matrix(ctx: Context, left: Callable[[], float]) -> Iterator[Dict]:
    """experiments.generation_matrix's rows (weights x search) on the HF run's last checkpoint, one
    weights at a time (each beside fp32, which its texts are compared with) while the part has time."""
    hf = hf_model(ctx)
    batch_size, batch_tokens = run_batches(hf.options, ctx.device)
    options = {"prompts": hf.prompts, "max_new_tokens": None, "max_len_a": hf.options["max_len_a"],
               "max_len_b": hf.options["max_len_b"], "generation_kwargs": hf.options["generation_kwargs"],
               "batch_tokens": batch_tokens}
    took = 0.0
    for name in WEIGHTS:
        if took > left():
            yield {"weights": name, "skipped": f"about {took:.0f} s needed, {max(left(), 0):.0f} s left"}
            continue
        start = time.monotonic()
        rows = matrix(hf.model, hf.tokenizer, hf.gold_path, ctx.device, beams=ctx.sizes.beam,
                      batch_size=batch_size, weights=tuple(dict.fromkeys(("fp32", name))),
                      evaluator_options=options)
        took = time.monotonic() - start
        yield from ({"checkpoint": Path(hf.checkpoint).name, **row} for row in rows if row["weights"] == name)


def part_batches(ctx: Context, left: Callable[[], float]) -> Iterator[Dict]:
    """Generation time at the check's beam by batch_size (prompts a batch), by batch_tokens, and with
    the evaluator's default for the device; the texts compared with the first row's."""
    hf_model(ctx)
    settings = ([("default", {"batch_size": None, "batch_tokens": None})]
                + [(f"batch_size {b}", {"batch_size": b}) for b in ctx.sizes.batch_sizes]
                + [(f"batch_tokens {t}", {"batch_size": None, "batch_tokens": t}) for t in ctx.sizes.batch_tokens])
    first = None
    for asked, given in settings:
        row = {"beam": ctx.sizes.beam, "asked": asked}
        try:
            ev = evaluator(ctx, **given)
            texts, seconds = timed_generation(ctx, ev)
            first = first or texts
            row.update(resolved_batches(ev), gen_s=round(seconds, 3),
                       same_texts=f"{sum(a == b for a, b in zip(texts, first))}/{len(texts)}")
        except Exception as err:  # noqa: BLE001 - e.g. batch_tokens where the evaluator has none
            row["error"] = error_text(err)
        yield row
        if left() <= 0:
            yield {"note": "the part's time is spent"}
            return


def part_beams(ctx: Context, left: Callable[[], float]) -> Iterator[Dict]:
    """A full validation (NBestEvaluator.evaluate) at each beam, with the run's batches: generation,
    the scoring beside it, and the rest of the wall time."""
    hf_model(ctx)
    for beam in ctx.sizes.beams:
        if left() <= 0:
            yield {"beam": beam, "skipped": "the part's time is spent"}
            continue
        row: Dict[str, Any] = {"beam": beam}
        try:
            ev = evaluator(ctx, num_beams=beam, num_return_sequences=beam)
            try:
                synchronize(ctx.device)
                start = time.perf_counter()
                result = ev.evaluate(ctx._hf.model)
                wall = time.perf_counter() - start
            finally:
                ev.close()
            row.update(resolved_batches(ev), prompts=result.n_prompts, wall_s=round(wall, 3),
                       gen_s=round(result.gen_s, 3), score_s=round(result.score_s, 3),
                       overhead_s=round(result.overhead_s, 3), map=result.values.get("map"))
        except Exception as err:  # noqa: BLE001 - e.g. out of memory at the largest beam
            row["error"] = error_text(err)
        yield row


# -- part 5: score --jobs ------------------------------------------------------------------------


def part_jobs(ctx: Context, left: Callable[[], float]) -> Iterator[Dict]:
    """`nbest-eval score --jobs N` by N (experiments.score_jobs) on bench's large set made from the dev
    gold, while the part has time: a count is skipped when the one before took longer than is left
    (fewer jobs take longer: the later counts' estimates are low, by as little as the counts are close)."""
    from experiments.score_jobs import large_set, timed_score
    from nbest_eval.processes.workers import available_cores

    s = ctx.sizes
    with tempfile.TemporaryDirectory(dir=ctx.work) as workdir:
        start = time.monotonic()
        gold_file, nbest_file, prompts = large_set(str(ctx.data / DEV_GOLD), Path(workdir), s.copies, s.size)
        yield {"prompts": prompts, "size": s.size, "file_mb": round(nbest_file.stat().st_size / 2 ** 20, 1),
               "cores": available_cores(), "write_s": round(time.monotonic() - start, 1)}
        first, took = None, 0.0
        for n in s.jobs:
            if took > left():
                yield {"jobs": n, "skipped": f"about {took:.0f} s needed, {max(left(), 0):.0f} s left"}
                continue
            run = timed_score(gold_file, nbest_file, n, None)
            took, first = run["wall_s"], first or run
            yield {"jobs": n, "wall_s": round(run["wall_s"], 3), "speedup": round(first["wall_s"] / run["wall_s"], 3),
                   "serial_s": None if run["serial_s"] is None else round(run["serial_s"], 3),
                   "identical": run["values"] == first["values"]}


#: the parts that generate from the HF loop run's last checkpoint
NEED_HF_RUN = {"matrix", "batches", "beams"}
PARTS = {"runs": part_runs, "matrix": part_matrix, "batches": part_batches, "beams": part_beams, "jobs": part_jobs}


# -- the command ---------------------------------------------------------------------------------


def choices(text: str, allowed: Sequence[str], option: str) -> Tuple[str, ...]:
    chosen = tuple(dict.fromkeys(word.strip() for word in text.split(",") if word.strip()))
    wrong = [word for word in chosen if word not in allowed]
    if wrong or not chosen:
        raise argparse.ArgumentTypeError(f"{option}: {', '.join(wrong) or 'nothing'} is not one of "
                                         f"{', '.join(allowed)}")
    return chosen


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    shares = ", ".join(f"{k} {round(v * 100)}%%" for k, v in SHARES.items())  # %% for argparse
    p = argparse.ArgumentParser(prog="python -m scripts.gpu_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="STAPLE en_pt directory (default: %(default)s)")
    p.add_argument("--out", type=Path, required=True, help="where check.json, check.md and runs/ go")
    p.add_argument("--budget", type=float, default=450.0,
                   help=f"seconds for all parts together, shared out as {shares} (default: %(default)s)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda when torch sees a GPU (default)")
    p.add_argument("--smoke", action="store_true", help="every part at toy size (the default on the CPU)")
    p.add_argument("--modes", default=",".join(MODES),
                   help="--nbest-mode of the runs, in order while budget remains (default: %(default)s)")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="the runs' frameworks (default: %(default)s)")
    p.add_argument("--parts", default=",".join(SHARES), help="the parts to run (default: %(default)s)")
    p.add_argument("--work", type=Path, default=None,
                   help="where the runs train, new or empty (default: a temporary directory, removed at the end)")
    args = p.parse_args(argv)
    try:
        args.modes = choices(args.modes, MODES, "--modes")
        args.frameworks = choices(args.frameworks, FRAMEWORKS, "--frameworks")
        args.parts = choices(args.parts, tuple(SHARES), "--parts")
    except argparse.ArgumentTypeError as err:
        p.error(str(err))
    args.parts = tuple(name for name in SHARES if name in args.parts)  # the running order
    if set(args.parts) & NEED_HF_RUN and not ("runs" in args.parts and "hf" in args.frameworks
                                               and "loop" in args.modes):
        p.error(f"--parts {','.join(sorted(set(args.parts) & NEED_HF_RUN))} need the HF loop run of this call: "
                "add runs to --parts, hf to --frameworks and loop to --modes")
    if args.work is not None and args.work.exists() and (not args.work.is_dir() or any(args.work.iterdir())):
        p.error(f"--work {args.work}: exists and is not an empty folder (runs from an earlier check are never "
                "reused); choose a new one")
    if args.budget <= 0:
        p.error("--budget must be positive")
    if not (args.data / DEV_GOLD).is_file():
        p.error(f"--data {args.data}: no STAPLE en_pt data there (no {DEV_GOLD})")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        device = resolve_device(args.device)
    except InputError as err:
        print(f"python -m scripts.gpu_check: error: {err}", file=sys.stderr)
        return 2
    sizes = SMOKE if args.smoke or device == "cpu" else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    header = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "smoke": sizes is SMOKE, "budget_s": args.budget,
              "data": str(args.data), "modes": list(args.modes), "frameworks": list(args.frameworks),
              "sizes": asdict(sizes), "machine": machine(device)}
    check = Check(args.out, args.budget, header)
    log(f"{label(header['machine'])}; {'smoke' if header['smoke'] else 'full'} sizes, budget {args.budget:.0f} s, "
        f"results in {args.out}")
    ctx = Context(args.data.resolve(), device, sizes, args.frameworks, args.modes, work, args.out.resolve())
    signal.signal(signal.SIGTERM, stop)
    try:
        run_parts(check, [(name, lambda left, f=PARTS[name]: f(ctx, left)) for name in args.parts],
                  {name: SHARES[name] for name in args.parts})
    except Stopped as err:
        log(f"stopped by {err}; {args.out / 'check.json'} has every row finished before")
        return 143
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, part in check.parts.items() if part["status"] == "error"]
    log(f"finished in {time.monotonic() - check.started:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else "")
        + f"; {args.out / 'check.json'}, {args.out / 'check.md'}")
    return 1 if failed else 0
