"""What the significance test files share: systems whose p-values sacrebleu can check, their
per-prompt statistics, trec_eval's average precisions, and checkpoint runs on disk."""

import numpy as np
import pytrec_eval
from cases import random_case, trec_inputs

from nbest_eval import Hyp
from nbest_eval.formats import write_gold, write_nbest
from nbest_eval.significance import PerPrompt

N_PROMPTS = 120


def systems(seeds=(3, 4, 5)):
    """One gold and a system per seed, every prompt with a list (sacrebleu needs a hypothesis per segment)."""
    gold, _ = random_case(seeds[0], n_prompts=N_PROMPTS, nil_prompts=False, max_hyps=10)
    out = []
    for seed in seeds:
        _, nbest = random_case(seed, n_prompts=N_PROMPTS, nil_prompts=False, max_hyps=10)
        for i, prompt in enumerate(gold):
            # some top-1 hypotheses are the reference itself, so that systems differ in BLEU
            top = prompt.translations[0][0] if (i + seed) % 3 == 0 else None
            hyps = nbest.get(prompt.id) or [Hyp("a casa", -1.0)]
            nbest[prompt.id] = ([Hyp(top, 0.0)] if top else []) + hyps
        out.append(nbest)
    return gold, out


def sacrebleu_inputs(gold, nbest):
    """bleu_1x1's segments: each prompt's top hypothesis against its highest-weight translation."""
    refs = [sorted(p.translations, key=lambda t: -t[1])[0][0] for p in gold]
    return [nbest[p.id][0].text for p in gold], [refs]


def per_prompt(scorer, gold, nbest, name):
    return PerPrompt(scorer, scorer.score(gold, nbest, keep_per_prompt=True).per_prompt, name)


def average_precisions(gold, nbest):
    """trec_eval's per-prompt AP (0 for a prompt with valid translations but no hypothesis)."""
    qrels, run = trec_inputs(gold, nbest, graded=False)
    found = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    return np.array([found.get(p.id, {"map": 0.0})["map"] for p in gold if p.id in qrels])


def write_runs(tmp, count):
    """``count`` checkpoints' n-best files under ``tmp``/runs (the three systems in turn) and select's
    --gold option."""
    gold, lists = systems((3, 4, 5))
    write_gold(gold, tmp / "gold.txt")
    (tmp / "runs").mkdir()
    for i in range(count):
        write_nbest(lists[i % 3], tmp / "runs" / f"checkpoint{i + 1}.tsv", "tsv")
    return ["--gold", tmp / "gold.txt"]
