"""Property tests: shard additivity, bounded values, duplicates never add credit."""

import random

from cases import random_case
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import Hyp, Scorer
from nbest_eval.metrics.base import N_EMPTY, N_PROMPTS, N_REL

RANKING = ["map", "map_min", "rr", "p1", "p3", "recall3", "rprec", "ndcg3", "rr_t", "rbp_t", "ndcg_t",
           "ap_t", "wf1", "f1", "precision", "recall", "wrecall", "iprec0.0", "iprec0.3", "iprec0.7", "iprec1.0",
           "ipr11", "f2", "f0.5", "e2", "e0.25", "coverage", "novelty", "relative_recall", "recall_effect"]
COUNTS = ["num_ret", "num_rel", "num_rel_ret"]  # trec_eval's sums over prompts
ALL = RANKING + COUNTS + ["pref_spearman", "pref_pearson", "bleu_1x1", "bleu_3x2", "bleu_allxall"]
SCORER = Scorer(ALL)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), shards=st.integers(1, 6))
def test_scoring_in_shards_and_adding_equals_scoring_whole(seed, shards):
    gold, nbest = random_case(seed, n_prompts=15)
    whole = SCORER.score(gold, nbest)
    rng = random.Random(seed)
    parts = [SCORER.zero() for _ in range(shards)]
    for prompt in gold:
        i = rng.randrange(shards)  # uneven, possibly empty shards
        parts[i] = parts[i] + SCORER.prompt_stats(prompt, nbest.get(prompt.id, []))
    summed = sum(parts)
    for name in SCORER.stat_names:
        if name.startswith("bleu") or name in (N_PROMPTS, N_REL, N_EMPTY) or name.endswith(":n"):
            assert summed[name] == whole.stats[name], name  # integer counts: exact
        else:
            assert abs(summed[name] - whole.stats[name]) < 1e-9, name
    values = SCORER.values(summed)
    for key, value in whole.values.items():
        assert (value is None and values[key] is None) or abs(values[key] - value) < 1e-9, key


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_ranking_values_lie_in_unit_interval_and_counts_are_whole(seed):
    gold, nbest = random_case(seed, n_prompts=8)
    scorer = Scorer(RANKING + COUNTS)
    for prompt in gold:
        values = scorer.values(scorer.prompt_stats(prompt, nbest.get(prompt.id, [])))
        for key in RANKING:
            assert values[key] is None or 0.0 <= values[key] <= 1.0 + 1e-12, (key, values[key])
        assert all(values[key] == int(values[key]) >= 0 for key in COUNTS)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), data=st.data())
def test_copies_that_normalize_alike_never_add_credit(seed, data):
    gold, nbest = random_case(seed, n_prompts=6, nil_prompts=False)
    scorer = Scorer(RANKING + COUNTS)
    for prompt in gold:
        hyps = nbest.get(prompt.id, [])
        if not hyps:
            continue
        i = data.draw(st.integers(0, len(hyps) - 1))
        j = data.draw(st.integers(i + 1, len(hyps)))
        copy = Hyp(hyps[i].text.upper() + "!", hyps[i].score)
        with_copy = hyps[:j] + [copy] + hyps[j:]
        assert scorer.values(scorer.prompt_stats(prompt, with_copy)) == \
            scorer.values(scorer.prompt_stats(prompt, hyps))
