#!/usr/bin/env python
"""Benchmarks of the metric core, side by side in one run (see BENCHMARKS.md).

On the STAPLE en_pt dev gold with synthetic 100-best and 1000-best lists:
  1. x-best y-ref BLEU: nbest-eval's engine vs sacrebleu's corpus_bleu on the literal pseudo-corpus,
     and |delta|. Engine "cold": references extracted in the call; "new hyps": references cached (as
     from the second validation on) and hypotheses never tokenized before; "seen hyps": the same
     lists again (the engine caches tokenizations);
  2. MAP: nbest-eval vs pytrec_eval (trec_eval), and |delta|;
  3. all default metrics;
  4. start-up: ``import nbest_eval`` and ``nbest-eval --help`` in a fresh interpreter, and which heavy
     modules they load (none of torch, fairseq, transformers, scipy, matplotlib should);
  5. significance, beyond scoring: select's work for 20 checkpoints x the gold's prompts x the four
     validation measures (1,000 bootstrap resamples: every measure's interval for every checkpoint,
     and the paired bootstrap of each against the best), and 10,000 approximate-randomization trials
     for two systems and the four measures;
  6. with ``--only generation --runs FAIRSEQ_RUN HF_RUN``: n-best generation of the validation prompts
     by the two ``scripts.staple_en_pt`` runs' checkpoints of one epoch, each with its run's own
     validation settings (beam, length bound, batches), alternated in one process; the HF checkpoint
     with the evaluator's choice of beam search, with transformers' own (``custom_generate=None``) and,
     where the evaluator chose transformers' (on a GPU), with the pruning search. ``--device`` and
     ``--precision`` (autocast; default: the precision the HF run recorded) apply to the HF checkpoint;
     fairseq's generates where its run trained (CUDA when there is one, unless the run was --cpu), in
     the run's dtype. Every HF list must have the texts, in the same order, of transformers' search;
     the largest score difference is reported, and must be 0 on the CPU and within
     :data:`SCORE_TOLERANCE` on a GPU.

    python -m scripts.bench [--gold PATH] [--sizes 100,1000] [--repeat 3] [--only significance]
    python -m scripts.bench --only generation --runs FAIRSEQ_RUN HF_RUN [--epoch N] [--repeat 3]
                            [--device auto|cpu|cuda] [--precision fp32|bf16|fp16]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sacrebleu

from nbest_eval import DEFAULT_METRICS, VALIDATION_METRICS, Hyp, Scorer, norm
from nbest_eval.formats import read_gold, write_nbest
from nbest_eval.metrics.bleu import top_references

#: the largest score difference allowed between two searches' lists on an accelerator, absolute, on the
#: length-normalised log-probabilities, by precision: the same sums in other kernels (other batch shapes)
#: differ in float32's last bits, and in bfloat16's or float16's 8 or 11 mantissa bits under autocast.
#: On the CPU the scores must be equal.
SCORE_TOLERANCE = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}
DEFAULT_GOLD = Path(__file__).resolve().parents[1] / ".." / "shared/data/staple/en_pt/dev.en_pt.2020-02-20.gold.txt"


def synthetic_nbest(gold, size, seed=0):
    """Per prompt: ``size`` distinct hypotheses (as beam search gives), a ranked mix of gold
    translations and corrupted copies (words dropped, swapped or repeated) with decreasing
    log-probability scores, so that some of each list is valid."""
    rng = random.Random(seed)
    nbest = {}
    for prompt in gold:
        texts = [t for t, _ in prompt.translations]
        seen, hyps = set(), []
        while len(hyps) < size:
            words = rng.choice(texts).split()
            for _ in range(len(seen) // len(texts) + (rng.random() < 0.5)):  # more edits once copies run out
                i, j = rng.randrange(len(words)), rng.randrange(len(words))
                edit = rng.random()
                if edit < 0.3 and len(words) > 1:
                    del words[i]
                elif edit < 0.6:
                    words[i], words[j] = words[j], words[i]
                else:
                    words.insert(i, words[j])
            text = " ".join(words)
            if text not in seen:
                seen.add(text)
                hyps.append(Hyp(text, -0.1 * len(hyps) - rng.random()))
        nbest[prompt.id] = hyps
    return nbest


def timed(fn, repeat=1):
    """(result, best seconds of ``repeat`` runs)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def pseudo_corpus(gold, nbest, x, y):
    hyps, refs = [], []
    for prompt in gold:
        prompt_refs = top_references(prompt, y)
        for hyp in nbest[prompt.id][:x]:
            hyps.append(hyp.text)
            refs.append(prompt_refs)
    width = max(len(r) for r in refs)
    return hyps, [[r[i] if i < len(r) else None for r in refs] for i in range(width)]


def bench_bleu(gold, nbest, x, y, repeat):
    key = f"bleu_{x}x{y}"
    hyps, streams = pseudo_corpus(gold, nbest, x, y)
    reference, t_sacre = timed(lambda: sacrebleu.corpus_bleu(hyps, streams).score)
    scorer = Scorer([key])

    def forget_tokenizations():
        """Hypotheses never seen: empty the engine's segment cache and sacrebleu's tokenizer memo."""
        scorer.bleu.tokenized.clear()
        getattr(type(scorer.bleu.bleu.tokenizer).__call__, "cache_clear", lambda: None)()

    def fresh():
        """References cached, hypotheses never seen: a new checkpoint's lists in the training loop."""
        forget_tokenizations()
        return scorer.score(gold, nbest).values[key]

    forget_tokenizations()
    cold, t_cold = timed(lambda: scorer.score(gold, nbest).values[key])
    warm, t_warm = timed(lambda: scorer.score(gold, nbest).values[key], repeat)
    new, t_new = timed(fresh, repeat)
    return {"metric": key, "segments": len(hyps), "sacrebleu_s": t_sacre, "cold_s": t_cold, "warm_s": t_warm,
            "fresh_s": t_new, "speedup_cold": t_sacre / t_cold, "speedup_warm": t_sacre / t_warm,
            "speedup_fresh": t_sacre / t_new, "bleu": warm,
            "abs_delta": max(abs(v - reference) for v in (cold, warm, new))}


def bench_map(gold, nbest, repeat):
    import pytrec_eval
    qrels = {p.id: {norm(t): 1 for t, _ in p.translations} for p in gold}

    def trec():
        run = {}
        for pid, hyps in nbest.items():
            keys = list(dict.fromkeys(norm(h.text) for h in hyps))
            run[pid] = {k: float(len(keys) - i) for i, k in enumerate(keys)}
        per_query = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
        return sum(v["map"] for v in per_query.values()) / len(per_query)

    scorer = Scorer(["map"])
    ours, t_ours = timed(lambda: scorer.score(gold, nbest).values["map"], repeat)
    theirs, t_trec = timed(trec, repeat)
    return {"map": ours, "nbest_eval_s": t_ours, "pytrec_eval_s": t_trec, "ratio": t_trec / t_ours,
            "abs_delta": abs(ours - theirs)}


def bench_defaults(gold, nbest, repeat):
    scorer = Scorer(DEFAULT_METRICS)
    _, t_cold = timed(lambda: scorer.score(gold, nbest))
    _, t_warm = timed(lambda: scorer.score(gold, nbest), repeat)
    return {"metrics": len(DEFAULT_METRICS), "cold_s": t_cold, "warm_s": t_warm}


def score_process(gold_path, nbest_path, metrics, jobs=None):
    """One ``nbest-eval score`` process: (its JSON output, wall seconds, peak resident memory in MB)."""
    command = [sys.executable, "-m", "nbest_eval", "score", "--gold", str(gold_path), "--nbest", str(nbest_path),
               "--metrics", metrics, "--json"] + ([] if jobs is None else ["--jobs", str(jobs)])
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "%M"] + command, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    return json.loads(result.stdout), seconds, int(result.stderr.strip().splitlines()[-1]) / 1024


def bench_cli(gold_path, nbest, sacrebleu_s, workdir):
    """The whole ``nbest-eval score --metrics bleu_100x100`` process (start-up, reading, scoring) vs
    sacrebleu on the pseudo-corpus, which is already in memory."""
    path = workdir / "nbest100.tsv"
    write_nbest(nbest, path, "tsv", overwrite=True)
    _, seconds, peak = min((score_process(gold_path, path, "bleu_100x100") for _ in range(3)), key=lambda r: r[1])
    return {"cli_s": seconds, "sacrebleu_s": sacrebleu_s, "speedup": sacrebleu_s / seconds, "peak_mb": peak}


def bench_large(gold, workdir, copies=4, size=1000):
    """``copies`` x the gold's prompts (distinct ids and texts), ``size``-best lists, scored by whole
    processes with --jobs 1 and 2: time, peak memory, identical values."""
    from experiments.score_jobs import large_set  # here: score_jobs imports this module

    gold_path, nbest_path, prompts = large_set(gold, workdir, copies, size)
    rows = {}
    for jobs in (1, 2):
        values, seconds, peak = score_process(gold_path, nbest_path, "map,wf1,bleu_100x100", jobs)
        rows[jobs] = {"seconds": seconds, "peak_mb": peak, "values": values}
    return {"prompts": prompts, "size": size, "jobs": rows, "speedup_jobs2": rows[1]["seconds"] / rows[2]["seconds"],
            "identical": rows[1]["values"] == rows[2]["values"]}


HEAVY = ("torch", "fairseq", "transformers", "scipy", "matplotlib")
STARTUP = {"import nbest_eval": "import nbest_eval",
           "nbest-eval --help": "import contextlib, io, nbest_eval.cli as c\n"
                                "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
                                "    c.main(['--help'])"}


def bench_significance(gold, repeat, checkpoints=20, size=16):
    """Seconds beyond scoring (the per-prompt statistics are computed first, as select's cache keeps them)."""
    from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

    scorer = Scorer(VALIDATION_METRICS)
    systems = [PerPrompt(scorer, scorer.score(gold, synthetic_nbest(gold, size, seed), keep_per_prompt=True)
                         .per_prompt, f"checkpoint{seed}") for seed in range(checkpoints)]

    def select_like():
        intervals = [confidence_intervals(s) for s in systems]
        return intervals, paired_test(systems[0], systems[1:], "bs")

    _, t_bootstrap = timed(select_like, repeat)
    _, t_ar = timed(lambda: paired_test(systems[0], systems[1:2], "ar"), repeat)
    return {"checkpoints": checkpoints, "prompts": len(gold), "measures": len(VALIDATION_METRICS),
            "bootstrap_s": t_bootstrap, "ar_s": t_ar}


def bench_generation(runs, epoch, repeat, device="cpu", precision=None):
    """Seconds to generate the validation prompts' n-best lists from each run's checkpoint of ``epoch``
    (default: the last epoch both runs validated), best of ``repeat``, the frameworks alternated;
    loading the checkpoint (well under a second) included. ``hf_generate`` is the HF checkpoint with
    transformers' own beam search, whose texts every other HF row must have (``lists``). The HF
    checkpoint generates in ``precision`` (None: the precision its run recorded, as it does the other
    settings, so that its time compares with the run's in-loop time)."""
    import torch

    from experiments.generation_matrix import compare
    from experiments.staple.selection import generation
    from nbest_eval.hf.beam_search import beam_search, choose_search
    from nbest_eval.hf.evaluator import PRECISIONS

    summaries = [json.loads((Path(run) / "summary.json").read_text()) for run in runs]
    if [s["framework"] for s in summaries] != ["fairseq", "hf"]:
        sys.exit("bench: --runs takes a fairseq run, then a Hugging Face run, of scripts.staple_en_pt")
    golds = [read_gold(s["valid_gold"]) for s in summaries]
    if golds[0].ids() != golds[1].ids():
        sys.exit("bench: the two runs were validated on different prompts")
    epochs = [{row["epoch"]: row for row in s["validations"]} for s in summaries]
    epoch = validated_epoch(runs, epochs, epoch)
    precision, precision_from = (precision, "--precision") if precision else (
        recorded_precision(epochs[1][epoch]["checkpoint"]), "the HF run's record")
    pruning, reason = choose_search(device, PRECISIONS[precision] or torch.float32)  # the recipe saves fp32 weights
    rows = {}
    for run, summary, gold, validations in zip(runs, summaries, golds, epochs):
        options = generation(summary, Path(run), 1)
        framework = options.pop("framework")
        del options["average"]
        if framework == "hf":
            from nbest_eval.hf import checkpoint_nbest

            options.update(prompts=str(Path(run) / "data" / "valid.src"), device=device,  # the callback's batches
                           precision=precision)
        else:
            from nbest_eval.fairseq.checkpoints import checkpoint_nbest
        validation = validations[epoch]
        variants = {framework: options}
        if framework == "hf":
            searches = {"hf_generate": None} if pruning else {"hf_generate": None, "hf_pruning": beam_search}
            for name, search in searches.items():
                variants[name] = {**options, "generation_kwargs": {**options["generation_kwargs"],
                                                                   "custom_generate": search}}
        for name, settings in variants.items():
            rows[name] = {"checkpoint": validation["checkpoint"], "in_loop_s": validation["gen_seconds"],
                          "generate": functools.partial(checkpoint_nbest, validation["checkpoint"], gold, **settings),
                          "seconds": []}
    for _ in range(repeat):
        for row in rows.values():
            row["lists"], seconds = timed(row["generate"])
            row["seconds"].append(seconds)
    ids = list(rows["hf_generate"]["lists"])
    theirs = [rows["hf_generate"]["lists"][i] for i in ids]
    result = {"epoch": epoch, "prompts": len(golds[0]), "beam": summaries[0]["beam"], "device": str(device),
              "precision": precision, "precision_from": precision_from,
              "search": "pruning" if pruning else "transformers", "search_reason": reason,
              "score_tolerance": 0.0 if torch.device(device).type == "cpu" else SCORE_TOLERANCE[precision],
              "lists": {name: compare([row["lists"].get(i, []) for i in ids], theirs) for name, row in rows.items()
                        if name.startswith("hf") and name != "hf_generate"}}
    for name, row in rows.items():
        result[name] = {"checkpoint": row["checkpoint"], "seconds": min(row["seconds"]), "in_loop_s": row["in_loop_s"]}
    result["hf_over_fairseq"] = result["hf"]["seconds"] / result["fairseq"]["seconds"]
    result["hf_generate_over_fairseq"] = result["hf_generate"]["seconds"] / result["fairseq"]["seconds"]
    return result


def validated_epoch(runs, epochs, epoch):
    """``epoch`` (default: the last both runs validated), exiting with the epochs a run validated when
    it did not validate that one. ``epochs``: each run's validations by epoch."""
    if epoch is None:
        common = set(epochs[0]) & set(epochs[1])
        if not common:
            sys.exit(f"bench: {runs[0]} and {runs[1]} validated no epoch in common ({_epochs(epochs[0])} and "
                     f"{_epochs(epochs[1])})")
        return max(common)
    for run, validations in zip(runs, epochs):
        if epoch not in validations:
            sys.exit(f"bench: --epoch {epoch}: {run} validated epochs {_epochs(validations)} only")
    return epoch


def _epochs(validations):
    return ", ".join(map(str, sorted(validations))) or "none"


def recorded_precision(checkpoint):
    """The precision the HF callback recorded generating ``checkpoint``'s lists in (fp32: no autocast,
    or no record)."""
    from nbest_eval.hf.checkpoints import recorded_settings

    return (recorded_settings(checkpoint) or {}).get("precision") or "fp32"


def lists_problems(row):
    """What is wrong with the HF lists of a generation row: texts or order unlike transformers'
    search, or scores beyond the row's tolerance (empty: nothing)."""
    problems = []
    for name, versus in row["lists"].items():
        if not versus["same_texts"]:
            problems.append(f"{name}: {versus['texts_changed']} prompts' lists have other texts or another "
                            f"order than transformers' search")
        if (versus["max_score_diff"] or 0.0) > row["score_tolerance"]:
            problems.append(f"{name}: scores differ from transformers' search by up to "
                            f"{versus['max_score_diff']:.3g} (tolerance {row['score_tolerance']:g})")
    return problems


def bench_startup(repeat):
    """Wall time of each start-up in a fresh interpreter (best of ``repeat``), the interpreter's own
    start subtracted, and the heavy modules it loaded."""
    def run(code):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(sorted(m for m in {HEAVY!r} "
                              f"if m in sys.modules))"], check=True, capture_output=True, text=True).stdout
        return time.perf_counter() - start, out.strip().splitlines()[-1]

    bare = min(run("pass")[0] for _ in range(repeat))
    rows = {}
    for name, code in STARTUP.items():
        times, loaded = zip(*(run(code) for _ in range(repeat)))
        rows[name] = {"seconds": min(times) - bare, "heavy_modules": loaded[0]}
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gold", default=os.environ.get("NBEST_EVAL_STAPLE_GOLD", str(DEFAULT_GOLD)),
                        help="STAPLE gold (default: ../shared/data/staple/en_pt dev gold)")
    parser.add_argument("--sizes", default="100,1000", help="n-best sizes (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each warm timing; the best is kept")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    parser.add_argument("--only", choices=("significance", "generation"), help="run only these rows")
    parser.add_argument("--runs", nargs=2, metavar=("FAIRSEQ_RUN", "HF_RUN"),
                        help="--only generation: a fairseq and a Hugging Face run of scripts.staple_en_pt")
    parser.add_argument("--epoch", type=int, help="--only generation: the epoch whose checkpoints generate "
                                                  "(default: the last both runs validated)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="--only generation: where the HF checkpoint generates (auto: cuda when there is one)")
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"),
                        help="--only generation: the HF checkpoint's generation under autocast in bf16 or fp16 "
                             "(fp32: none; default: the precision the HF run recorded in its checkpoint)")
    parser.add_argument("--large", action="store_true",
                        help="also score 4x the gold's prompts x 1000-best with --jobs 1 and 2 "
                             "(minutes, ~1 GB of disk)")
    args = parser.parse_args(argv)
    if args.only == "generation":
        if not args.runs:
            parser.error("--only generation needs --runs FAIRSEQ_RUN HF_RUN")
        row = bench_generation(args.runs, args.epoch, args.repeat, generation_device(parser, args.device),
                               args.precision)
        print(f"n-best generation, epoch {row['epoch']}, {row['prompts']} prompts, beam {row['beam']}, HF on "
              f"{row['device']} in {row['precision']} ({row['precision_from']}; {row['search']} search): fairseq "
              f"{row['fairseq']['seconds']:.2f} s, Hugging Face {row['hf']['seconds']:.2f} s "
              f"({row['hf_over_fairseq']:.2f}x fairseq's; with transformers' own beam search "
              f"{row['hf_generate']['seconds']:.2f} s, {row['hf_generate_over_fairseq']:.2f}x); "
              f"in the runs' own loops: {row['fairseq']['in_loop_s']:.2f} s and {row['hf']['in_loop_s']:.2f} s")
        if "hf_pruning" in row:
            print(f"  the pruning beam search: {row['hf_pruning']['seconds']:.2f} s")
        for name, versus in row["lists"].items():
            diff = versus["max_score_diff"]
            print(f"  {name} vs transformers' search: same texts and order {versus['same_texts']}, largest score "
                  f"difference {'-' if diff is None else f'{diff:.3g}'} (tolerance {row['score_tolerance']:g})")
        _write(args, {"generation": row})
        problems = lists_problems(row)
        return f"bench: {'; '.join(problems)}" if problems else None
    if not Path(args.gold).exists():
        sys.exit(f"bench: gold file not found: {args.gold} (pass --gold)")
    gold = read_gold(args.gold)
    print(f"gold: {args.gold}: {len(gold)} prompts, {sum(len(p.translations) for p in gold)} translations")
    results = {"significance": bench_significance(gold, args.repeat)}
    row = results["significance"]
    print(f"significance beyond scoring, {row['checkpoints']} checkpoints x {row['prompts']} prompts x "
          f"{row['measures']} measures: 1,000 bootstrap resamples (intervals + paired) {row['bootstrap_s']:.2f} s; "
          f"10,000 AR trials, two systems: {row['ar_s']:.2f} s")
    if args.only == "significance":
        return _write(args, results)
    results["startup"] = bench_startup(args.repeat)
    for name, row in results["startup"].items():
        print(f"{name:>18}: {row['seconds']:.3f} s beyond the interpreter's start; "
              f"heavy modules {row['heavy_modules']}")
    for size in [int(s) for s in args.sizes.split(",")]:
        nbest = synthetic_nbest(gold, size)
        print(f"\n== {size}-best lists ==")
        if size == 100:
            for xy in (1, 10, 100):
                row = bench_bleu(gold, nbest, xy, xy, args.repeat)
                results[f"{size}:{row['metric']}"] = row
                print(f"{row['metric']:>13}: sacrebleu pseudo-corpus {row['sacrebleu_s']:7.2f} s | engine cold "
                      f"{row['cold_s']:5.2f} s ({row['speedup_cold']:5.1f}x) | new hyps {row['fresh_s']:5.2f} s "
                      f"({row['speedup_fresh']:5.1f}x) | seen hyps {row['warm_s']:5.2f} s "
                      f"({row['speedup_warm']:5.1f}x) | |delta| {row['abs_delta']:.1e}")
            with tempfile.TemporaryDirectory() as workdir:
                row = bench_cli(args.gold, nbest, row["sacrebleu_s"], Path(workdir))
            results["100:cli"] = row
            print(f"  whole process: nbest-eval score --metrics bleu_100x100 {row['cli_s']:.2f} s "
                  f"({row['speedup']:.1f}x the pseudo-corpus), peak {row['peak_mb']:.0f} MB")
        row = bench_map(gold, nbest, args.repeat)
        results[f"{size}:map"] = row
        print(f"          map: nbest-eval {row['nbest_eval_s']:.3f} s | pytrec_eval {row['pytrec_eval_s']:.3f} s "
              f"(nbest-eval is {row['ratio']:.2f}x the speed) | |delta| {row['abs_delta']:.1e}")
        row = bench_defaults(gold, nbest, args.repeat)
        results[f"{size}:defaults"] = row
        print(f"     defaults: {row['metrics']} metrics, cold {row['cold_s']:.2f} s, warm {row['warm_s']:.2f} s")
    if args.large:
        with tempfile.TemporaryDirectory() as workdir:
            row = bench_large(gold, Path(workdir))
        results["large"] = row
        print(f"\n== {row['prompts']} prompts x {row['size']}-best, map,wf1,bleu_100x100, whole processes ==")
        for jobs, run in row["jobs"].items():
            print(f"  --jobs {jobs}: {run['seconds']:.1f} s, peak {run['peak_mb']:.0f} MB")
        print(f"  --jobs 2 is {row['speedup_jobs2']:.2f}x faster; identical values: {row['identical']}")
    _write(args, results)


def generation_device(parser, name):
    """``--device``'s torch device (auto: cuda when there is one)."""
    import torch

    from nbest_eval.data import InputError
    from nbest_eval.training.devices import resolve_device

    try:
        return torch.device(resolve_device(name))
    except InputError as err:
        parser.error(str(err))


def _write(args, results):
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
