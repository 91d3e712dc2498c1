"""Preference correlation against scipy on independently built pairs."""

import math

import numpy as np
import pytest
from cases import random_case
from scipy import stats

from nbest_eval import GoldPrompt, Hyp, Scorer


def expected_pairs(prompt, hyps):
    """Valid hypotheses, first copy of each normalized key, with their gold weights."""
    from nbest_eval import norm
    weights = {norm(t): w for t, w in prompt.translations}
    seen, pairs = set(), []
    for h in hyps:
        key = norm(h.text)
        if key in weights and key not in seen:
            pairs.append((h.score, weights[key]))
        seen.add(key)
    return pairs


def test_mean_correlations_equal_scipy():
    gold, nbest = random_case(3, n_prompts=60, max_valid=10, max_hyps=25)
    rhos, rs = [], []
    for prompt in gold:
        pairs = expected_pairs(prompt, nbest.get(prompt.id, []))
        if len(pairs) >= 3:
            s, w = np.array(pairs).T
            rhos.append(stats.spearmanr(s, w).statistic)
            rs.append(stats.pearsonr(s, np.log(w)).statistic)
    assert len(rhos) >= 10
    values = Scorer(["pref_spearman", "pref_pearson"]).score(gold, nbest).values
    assert values["pref_spearman"] == pytest.approx(np.mean(rhos), abs=1e-12)
    assert values["pref_pearson"] == pytest.approx(np.mean(rs), abs=1e-12)


def test_prompts_with_fewer_than_three_valid_or_no_scores_do_not_count():
    prompt = GoldPrompt("p", "x", (("a", 0.5), ("b", 0.3), ("c", 0.2)))
    scorer = Scorer(["pref_spearman"])
    two = scorer.prompt_stats(prompt, [Hyp("a", -1.0), Hyp("b", -2.0), Hyp("zz", -3.0)])
    unscored = scorer.prompt_stats(prompt, [Hyp("a"), Hyp("b"), Hyp("c")])
    assert scorer.values(two + unscored)["pref_spearman"] is None
    perfect = scorer.prompt_stats(prompt, [Hyp("a", -1.0), Hyp("b", -2.0), Hyp("c", -3.0)])
    assert scorer.values(two + perfect + unscored)["pref_spearman"] == pytest.approx(1.0)


def test_pearson_uses_log_weights():
    prompt = GoldPrompt("p", "x", (("a", 0.5), ("b", 0.25), ("c", 0.125)))
    hyps = [Hyp(t, math.log(w)) for t, w in prompt.translations]  # score = log weight: r = 1
    scorer = Scorer(["pref_pearson"])
    assert scorer.values(scorer.prompt_stats(prompt, hyps))["pref_pearson"] == pytest.approx(1.0)
