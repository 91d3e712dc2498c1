"""summary.json's ``selection`` section, from a run's saved lists: each measure's peak, the
patience and early-stopping replays, the ties, and the averaged checkpoints against the best one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from nbest_eval.data import Gold
from nbest_eval.significance import DEFAULT_ALPHA, DEFAULT_SEED, resamples_for
from nbest_eval.training.early_stopping import EarlyStopping

from .hf_run import eval_batch_size, recipe_settings
from .scoring import intervals_json
from .settings import METRICS, PATIENCE, SELECTION, fairseq_config
from .tables import selection_table


def pick(rows: Sequence[Dict], values: Sequence[Dict], index: Optional[int]) -> Optional[Dict]:
    """A validation as a selection result: its epoch and step and every measure's value there."""
    if index is None:
        return None
    return {"epoch": rows[index]["epoch"], "step": rows[index]["step"], "checkpoint": rows[index]["checkpoint"],
            "values": values[index]}


def analyse(out: Path, rows: Sequence[Dict], gold: Gold, patience: Sequence[int] = PATIENCE,
            generation: Optional[Dict] = None) -> Dict:
    """summary.json's ``selection`` section, from the saved lists (and the logged loss): for each
    measure of :data:`SELECTION`, the validation it peaks at and where fairseq's ``--patience P``
    (the strict rule) would stop on this curve and what it would keep, each scored by every
    measure; every early-stopping rule on MAP replayed at each ``patience`` (``stopping``: where it
    stops, what it keeps, that checkpoint's MAP and BLEU 100x100 with intervals and p-values against
    their bests, the share of epochs it saves); per validation, every measure's 95% bootstrap
    interval, its Holm-corrected p-value against that measure's best and whether it is tied with it
    (paired bootstrap over prompts); with ``generation`` (how the run generated), the average of the
    best and of the last checkpoints against the best single one (:func:`averages`). Written to
    ``out/selection.txt`` as a table too.

    Works on a finished run: ``--analyse OUT``."""
    from nbest_eval.selection import best_index, choose, systems_of_files

    systems = systems_of_files(gold, [row["nbest"] for row in rows], METRICS)
    choices = {key: choose(systems, key) for key in METRICS}
    values = [{**{k: choices[k].values[i] for k in METRICS},  # re-scored; the loss as logged
               **{k: row[k] for k in SELECTION if k in row and k not in METRICS}} for i, row in enumerate(rows)]
    epochs = [row["epoch"] for row in rows]
    measures = {}
    for key, maximize in SELECTION.items():
        curve = [v.get(key) for v in values]
        if all(v is None for v in curve):
            continue
        replays = {p: EarlyStopping(key, "strict", p, maximize).replay(curve) for p in patience}
        measures[key] = {
            "maximize": maximize, "peak": pick(rows, values, best_index(curve, maximize)),
            # the loss has no per-prompt statistics here: what it picks has no tied set of its own
            "tied_epochs": [epochs[i] for i in choices[key].tied] if key in choices else None,
            "patience": {str(p): {"stopped_at_epoch": None if stop is None else rows[stop]["epoch"],
                                  "keeps": pick(rows, values, decisions[-1].kept)}
                         for p, (decisions, stop) in replays.items()}}
    for result in measures.values():  # is each pick as good as what each other measure picks?
        result["peak"]["tied_with_the_best_by"] = [k for k, other in measures.items()
                                                   if other["tied_epochs"] and result["peak"]["epoch"] in
                                                   other["tied_epochs"]]
    logged_gap = max((abs(row[k] - v[k]) / max(1.0, abs(v[k])) for row, v in zip(rows, values) for k in METRICS
                      if v[k] is not None and k in row), default=0.0)
    selection = {"values_from": "the saved n-best lists re-scored against valid_gold; loss from the training log",
                 "significance": {"test": "paired bootstrap over prompts, Holm-corrected across the validations",
                                  "alpha": DEFAULT_ALPHA, "seed": DEFAULT_SEED,
                                  "n_samples": resamples_for(len(rows) - 1)},
                 "largest_relative_gap_logged_vs_rescored": logged_gap, "patience": list(patience),
                 "measures": measures, "stopping": stopping_replays(rows, systems, choices, patience),
                 "validations": [{"epoch": epochs[i], **values[i], "ci": {k: verdict_json(choices[k], i)
                                                                          for k in METRICS}}
                                 for i in range(len(rows))]}
    if generation and len(rows) >= generation["average"] and choices["map"].best is not None:
        selection["averages"] = averages(out, rows, gold, choices["map"], generation)
    (out / "selection.txt").write_text(selection_table(selection) + "\n")
    return selection


def stopping_replays(rows: Sequence[Dict], systems, choices: Dict, patience: Sequence[int]) -> List[Dict]:
    """:func:`nbest_eval.selection.replay_rules` on MAP, with epochs for indices."""
    from nbest_eval.selection import replay_rules

    replays = replay_rules(systems, choices, "map", patience=patience)
    for r in replays:
        stop, kept = r.pop("stopped_after"), r.pop("kept")
        r.update(stopped_after_epoch=None if stop is None else rows[stop]["epoch"], kept_epoch=rows[kept]["epoch"],
                 epochs_saved=r.pop("saved"))
    return replays


def verdict_json(choice, index: int) -> Optional[Dict]:
    """One validation's interval, p-value against the measure's best, and tie, for summary.json."""
    if not choice.verdicts or choice.verdicts[index].interval is None:
        return None
    verdict = choice.verdicts[index]
    return {**verdict.interval.as_dict(), "p_holm": verdict.p_holm, "tied": verdict.tied}


def averages(out: Path, rows: Sequence[Dict], gold: Gold, by_map, generation: Dict) -> Dict:
    """The parameters of the K (``generation["average"]``) best checkpoints by MAP averaged, and of
    the last K (fairseq's scripts/average_checkpoints.py habit), each generated as the run validated
    and tested (paired bootstrap, every measure) against the best single checkpoint by MAP, and
    against each other."""
    from nbest_eval import Scorer
    from nbest_eval.formats import read_nbest, write_nbest
    from nbest_eval.selection.averaging import best_k
    from nbest_eval.significance import PerPrompt, confidence_intervals, paired_test

    framework, k = generation["framework"], generation["average"]
    if framework == "hf":
        from nbest_eval.hf import checkpoint_nbest
        from nbest_eval.hf.averaging import average_checkpoints
    else:
        from nbest_eval.fairseq.averaging import average_checkpoints
        from nbest_eval.fairseq.checkpoints import checkpoint_nbest
    options = {name: v for name, v in generation.items() if name not in ("framework", "average")}
    scorer = Scorer(METRICS)

    def system(nbest, name):
        return PerPrompt(scorer, scorer.score(gold, nbest, keep_per_prompt=True).per_prompt, name)

    checkpoints = [row["checkpoint"] for row in rows]
    best = by_map.best
    single = system(read_nbest(rows[best]["nbest"], gold, "tsv"), f"epoch {rows[best]['epoch']}")
    chosen = {f"best{k}_by_map": best_k(checkpoints, by_map.values, k), f"last{k}": checkpoints[-k:]}
    report, averaged = {}, []
    for name, paths in chosen.items():  # each average generated as the run validated, scored like a checkpoint
        target = out / framework / (f"average-{name}" + ("" if framework == "hf" else ".pt"))
        if not os.path.exists(target):  # a re-analysis reuses the run's own average
            average_checkpoints(paths, target)
        nbest = checkpoint_nbest(str(target), gold, **options)
        lists = target.with_name(target.name.removesuffix(".pt") + ".tsv")  # beside the average
        write_nbest(nbest, lists, "tsv", overwrite=True)
        averaged.append(system(nbest, name))
        report[name] = {"epochs": [rows[checkpoints.index(p)]["epoch"] for p in paths], "path": str(target),
                        "nbest": str(lists)}
    against_single = paired_test(single, averaged, "bs", keys=METRICS)
    against_last = paired_test(averaged[1], averaged[:1], "bs", keys=METRICS)
    report["best_single"] = {"epoch": rows[best]["epoch"], "values": single.scores(),
                             "ci": intervals_json(confidence_intervals(single))}
    for name, results in against_single.items():
        report[name].update(values={k: r.score for k, r in results.items()},
                            ci=intervals_json({k: r.interval for k, r in results.items()}),
                            p_vs_best_single={k: r.p_value for k, r in results.items()})
    report[averaged[0].name]["p_vs_last"] = {k: r.p_value for k, r in against_last[averaged[0].name].items()}
    return report


def generation(summary: Dict, out: Path, average: int) -> Dict:
    """How the run generated its validation lists, for generating from averaged checkpoints alike,
    and how many checkpoints to average (``summary``: the run's summary.json)."""
    framework, beam = summary["framework"], summary["beam"]
    if framework == "hf":  # the callback's evaluation batches, so the lists are the ones it scores
        recipe = recipe_settings(summary.get("hf_recipe", "t5"))
        length = (0.0, recipe["max_new_tokens"]) if recipe["max_new_tokens"] else (recipe["max_len_a"],
                                                                                    recipe["max_len_b"])
        return {"framework": "hf", "average": average, "beam": beam, "max_len_a": length[0], "max_len_b": length[1],
                "batch_size": eval_batch_size(recipe, summary.get("device")),
                "generation_kwargs": recipe["generation_kwargs"],
                "device": summary.get("device")}  # None (a run from before --device): the GPU if any
    config = fairseq_config()
    return {"framework": "fairseq", "average": average, "beam": beam, "data": str(out / "fairseq" / "data-bin"),
            "remove_bpe": "sentencepiece", "max_len_a": float(config["--nbest-max-len-a"]),
            "max_len_b": int(config["--nbest-max-len-b"])}
