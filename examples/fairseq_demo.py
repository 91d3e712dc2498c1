"""The one-command demo (``make demo``): n-best validation end to end on the synthetic corpus.

    python examples/fairseq_demo.py [--out demo-run] [--fast] [--config ARGS]   # make demo
    python examples/fairseq_demo.py --nbest-mode async|off   # validation off the training clock | none

It imports only nbest_eval, which runs fairseq as commands, and the standard library; the model's
arguments are read from configs/tiny_transformer.args (a copy elsewhere takes ``--config``).

1. ``nbest-eval synth``: a many-valid-translations corpus (no download);
2. ``fairseq-preprocess``;
3. ``fairseq-train --user-dir $(nbest-eval user-dir) --task translation_nbest``: a tiny transformer validated with
   MAP, BLEU and F1 at every epoch, best checkpoint by MAP, early stopping with patience, every
   epoch's checkpoint kept, every validation's n-best lists saved;
4. ``nbest-eval select`` over all epoch checkpoints (re-generating their n-best lists);
5. ``nbest-eval compare``: how the measures rank the checkpoints, the x-best y-ref BLEU grid and
   the MAP vs 1x1 BLEU scatter; the best checkpoint against the first and the last one: their mean
   interpolated recall-precision curves and precision histograms (R-precision per prompt);
6. ``REPORT.md`` with the tables and plots: each measure per validation with its 95% bootstrap
   interval as a band, the validations statistically tied with each measure's best circled.

``--nbest-mode async``: step 3 hands each epoch's weights to a sidecar (``nbest-eval watch``, a child
process) that validates while training goes on; ``off``: plain ``translation``, no n-best validation
(the baseline of a wall-time comparison; the demo stops after step 3). ``summary.json`` records the
training's wall time and, per validation, the generation it held up (loop) or its result's lag (async).

``--device auto|cpu|cuda`` (auto: the GPU when torch sees one): fairseq-train gets ``--cpu`` on the
CPU, nothing on the GPU; the sidecar of ``--nbest-mode async`` runs beside training (on the GPU, the
same one). ``--precision bf16|fp16``: fairseq's ``--bf16``/``--fp16``, on a GPU only. Both are in
``summary.json``.

The output directory is the demo's own: a re-run replaces a directory that an earlier demo made
(it carries a marker file) and refuses any other existing directory.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from nbest_eval.analysis import plots
from nbest_eval.analysis.recall_precision import eleven_point
from nbest_eval.analysis.synth import generate, write_corpus
from nbest_eval.analysis.systems import SystemTable, read_table, write_table
from nbest_eval.cli import main as nbest_eval
from nbest_eval.data import InputError
from nbest_eval.fairseq import USER_DIR
from nbest_eval.fairseq.command_line import fairseq_command, plain_translation
from nbest_eval.formats import read_gold
from nbest_eval.selection import Choice, SelectReport, choices_of_files
from nbest_eval.significance import resamples_for
from nbest_eval.training.devices import add_device_arguments, fairseq_words, resolve_device, sidecar_device
from nbest_eval.training.timeline import lag_summary, timeline

#: the tiny model's fairseq-train arguments; a copy of this program elsewhere takes --config
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tiny_transformer.args"
MARKER = ".nbest-eval-demo"
METRICS = "map,map_min,rr,p1,ndcg10,ap_t,wf1,pref_spearman,bleu_1x1,bleu_10x10,bleu_100x100"
#: (train pairs, valid prompts, max epochs, patience). Few training pairs, so that learning takes
#: several epochs; a beam (BEAM) well below the ~100 valid translations per prompt, so that MAP has
#: room to grow instead of saturating at the beam's ceiling.
SIZES = {"full": (5000, 200, 12, 3), "fast": (3000, 40, 4, 2)}
BEAM = "16"
CURVES = ("map", "map_min", "rr", "p1", "ap_t", "wf1")
BLEU_CURVES = ("bleu_1x1", "bleu_10x10", "bleu_100x100")


def fresh_directory(out: Path) -> None:
    if out.exists():
        if not (out / MARKER).exists():
            raise InputError("exists and was not made by the demo; choose another --out", str(out))
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by examples/fairseq_demo.py; a re-run replaces this directory\n")


def run(command: List[str], log: Path) -> None:
    """Run a command, its output into ``log``; on failure show the log's tail."""
    print(f"$ {' '.join(shlex.quote(c) for c in command)}", flush=True)
    with open(log, "w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if code:
        tail = "".join(open(log).readlines()[-30:])
        sys.exit(f"{Path(sys.argv[0]).name}: command failed (exit {code}); the end of {log}:\n{tail}")


def train_args(out: Path, config_file: Path, epochs: int, patience: int, mode: str, device: str,
               precision: str) -> List[str]:
    """fairseq-train's command line (``device``: resolved, cpu or cuda)."""
    config = [*shlex.split(config_file.read_text(), comments=True), *fairseq_words(device, precision)]
    common = ["--save-dir", str(out / "checkpoints"), "--max-epoch", str(epochs), "--save-interval", "1"]
    if mode == "off":
        return [*fairseq_command("fairseq-train"), str(out / "data-bin"), *plain_translation(config), *common]
    return [*fairseq_command("fairseq-train"), str(out / "data-bin"), "--user-dir", USER_DIR, *config, *common,
            "--nbest-gold", str(out / "data" / "valid.gold.txt"), "--nbest-save-dir", str(out / "nbest"),
            "--patience", str(patience), "--nbest-beam", BEAM,
            *(["--nbest-mode", "async", "--nbest-async-device", sidecar_device(device)] if mode == "async" else [])]


def write_summary(out: Path, mode: str, seconds: float, history: List[Dict], device: str, precision: str) -> Dict:
    """summary.json: the training command's wall time (async: its wait for the sidecar at the end
    included), per validation the loss and the generation it held up (loop), each result's lag (async)."""
    rows = [{"epoch": int(row["epoch"]), "update": int(row["num_updates"]), "loss": as_float(row.get("loss")),
             **({"gen_seconds": as_float(row.get("nbest_gen_s"))} if mode == "loop" else {})} for row in history]
    summary = {"nbest_mode": mode, "device": device, "precision": precision, "training_seconds": round(seconds, 1),
               "epochs_trained": len(rows), "sidecar_device": sidecar_device(device) if mode == "async" else None,
               "validations": rows}
    if mode == "async":
        handed = timeline(out / "checkpoints")
        lags = {h.step: h for h in handed}
        for row in rows:
            found = lags.get(row["update"])
            row.update(lag_seconds=found and found.lag_s, lag_validations=found and found.lag_validations,
                       gen_seconds=found and found.timings.get("nbest_gen_s"))
        summary["lags"] = lag_summary(handed)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def valid_lines(log: Path) -> List[Dict]:
    """fairseq's JSON valid lines (one per validation)."""
    rows = []
    for line in log.read_text().splitlines():
        start = line.find("{")
        if start >= 0 and '"valid_' in line:
            try:
                row = json.loads(line[start:])
            except ValueError:
                continue
            rows.append({k.removeprefix("valid_"): v for k, v in row.items()})
    return rows


def as_float(value) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/fairseq_demo.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="demo-run", help="output directory (default: %(default)s)")
    parser.add_argument("--fast", action="store_true", help="a tiny run for CI (about a minute)")
    parser.add_argument("--epochs", type=int, help="training epochs at most (default: 12, --fast 4)")
    parser.add_argument("--patience", type=int,
                        help="early stopping's patience, by the plugin's default rule (default: 3, --fast 2)")
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help="the model's fairseq-train arguments (default: %(default)s)")
    parser.add_argument("--nbest-mode", choices=("loop", "async", "off"), default="loop",
                        help="n-best validation in the training loop (default), by a sidecar off the training "
                             "clock (async), or none (off: training alone, the wall-time baseline)")
    add_device_arguments(parser)
    args = parser.parse_args(argv)
    if not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    out = Path(args.out).resolve()
    pairs, prompts, epochs, patience = SIZES["fast" if args.fast else "full"]
    epochs, patience = args.epochs or epochs, args.patience or patience
    if epochs < 1 or patience < 1:
        parser.error("--epochs and --patience must be at least 1")
    start = time.time()
    try:
        device = resolve_device(args.device)
        command = train_args(out, args.config, epochs, patience, args.nbest_mode, device, args.precision)
        fresh_directory(out)
    except InputError as err:
        sys.exit(f"demo: {err}")

    print(f"[1/6] synthetic corpus: {pairs} training pairs, {prompts} valid prompts", flush=True)
    write_corpus(out / "data", generate(seed=1, train_pairs=pairs, valid_prompts=prompts))

    print("[2/6] fairseq-preprocess", flush=True)
    run([*fairseq_command("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--trainpref", str(out / "data" / "train"), "--validpref", str(out / "data" / "valid"),
         "--destdir", str(out / "data-bin"), "--workers", "1"], out / "preprocess.log")

    how = {"loop": f"n-best validation (patience {patience})", "off": "no n-best validation",
           "async": f"n-best validation by a sidecar (patience {patience})"}[args.nbest_mode]
    print(f"[3/6] fairseq-train with {how}, up to {epochs} epochs on {device} ({args.precision})", flush=True)
    started = time.time()
    run(command, out / "train.log")
    history = valid_lines(out / "train.log")
    trained = write_summary(out, args.nbest_mode, time.time() - started, history, device, args.precision)
    if args.nbest_mode == "off":
        print(f"\n--nbest-mode off: {trained['epochs_trained']} epochs trained in {trained['training_seconds']:.0f} s; "
              f"{out / 'summary.json'} (no n-best lists, so no report)")
        return 0

    print("[4/6] nbest-eval select over every epoch's checkpoint", flush=True)
    checkpoints = sorted(str(p) for p in (out / "checkpoints").glob("checkpoint[0-9]*.pt"))
    select_json = out / "select.json"
    gold = str(out / "data" / "valid.gold.txt")
    code = nbest_eval(["select", "--fairseq-data", str(out / "data-bin"), "--gold", gold,
                       *checkpoints, "--metric", "map", "--metrics", METRICS, "--patience", str(patience),
                       "--beam", BEAM, "--max-len-a", "1.2", "--max-len-b", "4", "--save", str(select_json),
                       "--link-best", str(out / "best.pt")])
    if code:
        sys.exit("demo: select failed")
    table = read_table(select_json)
    report = SelectReport.from_table(table)  # what select decided, typed

    print("[5/6] nbest-eval compare: how each measure ranks the checkpoints", flush=True)
    loss = {f"checkpoint{row['epoch']}.pt": as_float(row.get("loss")) for row in history if "epoch" in row}
    for system in table.systems:  # negated, so that for every measure higher is better
        system.values["neg_loss"] = None if loss.get(system.name) is None else -loss[system.name]
    write_table(table, out / "scores.json")
    agreement = capture_json(["compare", "--scores", str(out / "scores.json"), "--reference", "map",
                              "--heatmap", str(out / "agreement.png"), "--json"])
    saved = sorted((out / "nbest").glob("valid.epoch*.tsv"), key=lambda p: int(p.name.split(".")[1][5:]))
    grid = capture_json(["compare", "--gold", str(out / "nbest" / "valid.gold.txt"), "--nbest", *map(str, saved),
                         "--names", *[p.name.split(".")[1] for p in saved], "--reference", "map",
                         "--metrics", "bleu_1x1", "--bleu-grid", str(out / "bleu-grid.png"),
                         "--scatter", "map,bleu_1x1", str(out / "map-vs-bleu1x1.png"), "--json"])
    pictures = recall_precision(out, saved, f"epoch{int(report.best[len('checkpoint'):-len('.pt')])}")

    print("[6/6] REPORT.md", flush=True)
    choices = choices_of_files(read_gold(str(out / "nbest" / "valid.gold.txt")), [str(p) for p in saved],
                               CURVES + BLEU_CURVES)
    epochs_axis = [int(p.name.split(".")[1][5:]) for p in saved]
    draw_curves(epochs_axis, choices, CURVES, out / "curves.png", "n-best measures per epoch", "value")
    draw_curves(epochs_axis, choices, BLEU_CURVES, out / "bleu-curves.png", "x-best y-reference BLEU per epoch",
                "BLEU")
    written = write_report(out, table, report, history, agreement, grid, time.time() - start, patience,
                           (epochs_axis, choices), pictures)
    lags = trained.get("lags") or {}
    lag = f"; results arrived at most {lags['lag_s_max']:.0f} s after their hand-off" if lags.get("lag_s_max") else ""
    print(f"\ndemo finished in {time.time() - start:.0f} s (training {trained['training_seconds']:.0f} s, "
          f"--nbest-mode {args.nbest_mode}{lag}): {written}")
    return 0


def draw_curves(epochs: List[int], choices: Dict[str, Choice], keys: Sequence[str], path: Path, title: str,
                ylabel: str) -> None:
    """Each measure per validation, its 95% interval as a band, the validations tied with its best circled."""
    judged = {k: choices[k].verdicts for k in keys if choices[k].verdicts}
    plots.line_plot(epochs, {k: choices[k].values for k in keys}, path, xlabel="epoch", ylabel=ylabel,
                    title=f"{title} (band: 95% CI; circled: tied with the best)",
                    bands={k: ([v.interval and v.interval.low for v in verdicts],
                               [v.interval and v.interval.high for v in verdicts]) for k, verdicts in judged.items()},
                    rings={k: [v.tied for v in verdicts] for k, verdicts in judged.items()})


def recall_precision(out: Path, saved: List[Path], best: str) -> Optional[Dict]:
    """The validations' saved lists of the ``best`` epoch against the first and the last epoch's: their
    mean interpolated recall-precision curves (one ``compare --pr-curve``) and, per pair, the precision
    histogram of ``compare --paired bs --precision-histogram`` (the best minus the other); None with
    a single epoch."""
    lists = {path.name.split(".")[1]: str(path) for path in saved}
    first, last = list(lists)[0], list(lists)[-1]
    shown = list(dict.fromkeys([first, best, last]))
    if len(shown) < 2:
        return None
    gold = str(out / "nbest" / "valid.gold.txt")
    curves = capture_json(["compare", "--gold", gold, "--nbest", *[lists[n] for n in shown], "--names", *shown,
                           "--metrics", "map", "--pr-curve", str(out / "pr-curve.png"), "--json"])
    histograms = {}
    for other in [n for n in dict.fromkeys([first, last]) if n != best]:
        found = capture_json(["compare", "--gold", gold, "--nbest", lists[other], lists[best], "--names", other, best,
                              "--metrics", "map", "--paired", "bs", "--precision-histogram",
                              str(out / f"rprec-{best}-vs-{other}.png"), "--json"])
        histograms[other] = {**found["precision_histogram"],
                             "p_value": found["paired"]["systems"][best]["rprec"]["p_value"]}
    return {"best": best, "first": first, "last": last, "curves": curves["pr_curve"], "histograms": histograms}


def recall_precision_lines(pictures: Optional[Dict]) -> List[str]:
    """The report's section on :func:`recall_precision`'s pictures."""
    if pictures is None:
        return []
    best, curves = pictures["best"], pictures["curves"]
    lines = ["## Recall-precision: the best checkpoint against the first and the last", "",
             "From each validation's saved n-best lists: the mean interpolated recall-precision curve (at each of "
             "the 11 standard recall levels, the highest precision at that recall or more, averaged over the "
             "prompts; trec_eval's rule), and precision histograms: per prompt, the best epoch's R-precision minus "
             "the other one's, sorted by the difference.", "",
             "| epoch | " + " | ".join(f"{level:.1f}" for level in curves["levels"]) + " | 11-pt avg |",
             "|---" * (len(curves["levels"]) + 2) + "|"]
    for name, points in curves["systems"].items():
        mark = " **(best)**" if name == best else ""
        lines.append(f"| {name}{mark} | " + " | ".join(_fmt(v) for v in points) + f" | {_fmt(eleven_point(points))} |")
    lines += ["", "![recall-precision curves](pr-curve.png)", ""]
    for other, bars in pictures["histograms"].items():
        lines += [f"{best} against {other} ({'first' if other == pictures['first'] else 'last'} epoch): {best} has the "
                  f"higher R-precision on {bars['system_better']} of {len(bars['differences'])} prompts, {other} on "
                  f"{bars['baseline_better']}, equal on {bars['equal']} (paired bootstrap p = {bars['p_value']:.3g}).",
                  "", f"![precision histogram, {best} minus {other}](rprec-{best}-vs-{other}.png)", ""]
    for role in ("first", "last"):
        if pictures[role] == best:
            lines += [f"The best epoch is the {role} one: no histogram against itself.", ""]
    return lines


def capture_json(argv: List[str]) -> Dict:
    """Run an nbest-eval command in-process and parse its --json output."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        if nbest_eval(argv):
            sys.exit(f"demo: nbest-eval {argv[0]} failed")
    return json.loads(buffer.getvalue())


def disagreements(table: SystemTable, a: str, b: str) -> List[str]:
    """Checkpoint pairs that measures ``a`` and ``b`` order in opposite ways."""
    rows = []
    for i, first in enumerate(table.systems):
        for second in table.systems[i + 1:]:
            da = first.values[a] - second.values[a]
            db = first.values[b] - second.values[b]
            if da * db < 0:
                rows.append(f"| {first.name} vs {second.name} | {_fmt(first.values[a])} vs {_fmt(second.values[a])} "
                            f"| {_fmt(first.values[b])} vs {_fmt(second.values[b])} |")
    return rows


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def how_sure(epochs: List[int], choices: Dict[str, Choice]) -> List[str]:
    """The report's table: each measure's best validation, its interval, and the validations tied with it."""
    lines = ["## How sure is each pick?", "",
             f"Every validation's saved n-best lists, resampled by prompt ({resamples_for(len(epochs) - 1)} paired "
             "bootstrap resamples, Holm-corrected across the validations): the epoch each measure would pick, its "
             "95% interval, and the epochs it cannot tell apart from it.", "",
             "| measure | best epoch | value | 95% CI | epochs tied with it |", "|---|---|---|---|---|"]
    for key, choice in choices.items():
        if choice.best is None:
            continue
        ci = choice.verdicts[choice.best].interval
        interval = "n/a" if ci is None else f"[{_fmt(ci.low)}, {_fmt(ci.high)}]"
        lines.append(f"| {key} | {epochs[choice.best]} | {_fmt(choice.values[choice.best])} | {interval} | "
                     f"{', '.join(str(epochs[i]) for i in choice.tied)} |")
    return lines


def write_report(out: Path, table: SystemTable, selected: SelectReport, history: List[Dict], agreement: Dict,
                 grid: Dict, seconds: float, patience: int, validations: Tuple[List[int], Dict[str, Choice]],
                 pictures: Optional[Dict]) -> Path:
    """REPORT.md: ``table``, the checkpoints' scores (with minus the loss); ``selected``, what select decided."""
    keys = [k for k in table.keys if k != "neg_loss"]
    lines = ["# nbest-eval demo report", "",
             f"A tiny fairseq transformer trained on the synthetic corpus ({len(table.systems)} epochs, "
             f"{seconds:.0f} s in all), validated at every epoch by the `translation_nbest` plugin, then every "
             "epoch's checkpoint re-scored by `nbest-eval select`.", "",
             "## Checkpoints", "",
             "| checkpoint | map 95% CI | p vs best (Holm) | " + " | ".join(keys) + " |",
             "|---" * (len(keys) + 3) + "|"]
    for s in table.systems:
        mark = " **(best)**" if s.name == selected.best else " (tied)" if s.notes.get("tied") else ""
        ci = "" if s.notes.get("ci_low") is None else f"[{s.notes['ci_low']:.4f}, {s.notes['ci_high']:.4f}]"
        p = "" if s.notes.get("p_holm") is None else f"{s.notes['p_holm']:.4f}"
        lines.append(f"| {s.name}{mark} | {ci} | {p} | " + " | ".join(_fmt(s.values.get(k)) for k in keys) + " |")
    replay = selected.selection.stopping
    stopped_after = selected.name(replay.stopped_after)
    lines += ["", f"Best by MAP: **{selected.best}** (`best.pt` links to it). Statistically tied with it "
              f"(paired bootstrap over prompts, Holm-corrected p >= {selected.selection.alpha}): "
              f"{', '.join(selected.tied)}. With `--patience {patience}` (the `{replay.rule.rule}` early-stopping "
              "rule, as in training), " + (f"early stopping fires after {stopped_after}" if stopped_after else
                                           "training runs to the end") + f" and keeps {selected.name(replay.kept)}.",
              "",
              "![measures per epoch](curves.png) ![BLEU per epoch](bleu-curves.png)", "",
              *how_sure(*validations), "",
              "## Which checkpoint would each measure pick?", "", "| measure | best checkpoint |", "|---|---|"]
    for key in keys + ["neg_loss"]:
        values = [s.values.get(key) for s in table.systems]
        if any(v is not None for v in values):
            best = max((v, i) for i, v in enumerate(values) if v is not None)[1]
            lines.append(f"| {key} | {table.systems[best].name} |")
    lines += ["", "## Agreement with MAP's ranking of the checkpoints", "",
              "| measure | Spearman | Kendall | tau_AP | Pearson Rank |", "|---|---|---|---|---|"]
    for measure, values in agreement["agreement"].items():
        lines.append(f"| {measure} | " + " | ".join(_fmt(values.get(c)) for c in
                                                     ("spearman", "kendall", "tau_ap", "pearson_rank")) + " |")
    lines += ["", "`neg_loss` is minus the validation loss. ![agreement heatmap](agreement.png)", "",
              "## Where 1-best 1-reference BLEU and MAP disagree", ""]
    pairs = disagreements(table, "map", "bleu_1x1")
    if pairs:
        lines += [f"{len(pairs)} checkpoint pairs are ordered one way by MAP and the other by BLEU 1x1:", "",
                  "| pair | MAP | BLEU 1x1 |", "|---|---|---|", *pairs[:15]]
    else:
        lines.append("In this run MAP and BLEU 1x1 order every pair of checkpoints the same way.")
    xs = grid["bleu_grid"]["x"]
    grid_rows = ["| y \\ x | " + " | ".join(xs) + " |", "|---" * (len(xs) + 1) + "|"]
    for y, row in zip(grid["bleu_grid"]["y"], grid["bleu_grid"]["values"]):
        grid_rows.append(f"| {y} | " + " | ".join(_fmt(v) for v in row) + " |")
    lines += ["", "## x-best y-reference BLEU against MAP (the paper's Figure 4)", "",
              f"{grid['bleu_grid']['coefficient']} between MAP and each BLEU variant over the validations' "
              "saved n-best lists:", "", *grid_rows, "", "![BLEU grid](bleu-grid.png)",
              f"![MAP vs BLEU 1x1](map-vs-bleu1x1.png) (r^2 = {grid['scatter'][0]['r2']:.3f})", "",
              *recall_precision_lines(pictures),
              "## Files", "", "- `data/`: the synthetic corpus (`valid.gold.txt` is the STAPLE-format gold)",
              "- `checkpoints/`, `train.log`: the fairseq run; `nbest/`: every validation's n-best lists",
              "- `select.json`, `scores.json`: per-checkpoint scores; PNGs: the plots above", ""]
    report = out / "REPORT.md"
    report.write_text("\n".join(lines))
    return report


if __name__ == "__main__":
    sys.exit(main())
