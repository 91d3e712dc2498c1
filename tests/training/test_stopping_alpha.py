"""An alpha the paired bootstrap cannot reach is refused where a stopping rule is made, with the numbers.

paired_test's p-value is (c + 1) / (N + 1) with N resamples (sacrebleu's), so it is never below
1 / (N + 1), and a difference is significant only below alpha: with alpha at or under that bound no
validation is ever significantly better, and a run that improves keeps its first validation. The
oracle is the bound computed by hand; a validation of 20 prompts gets the first ``right`` of them
right (AP 1, else 0), so all 20 right against none is the largest difference there can be.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from nbest_eval import InputError, Scorer
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import EarlyStopping, State

N = 20
SCORER = Scorer(["map"])


def validation(right):
    matrix = np.zeros((N, len(SCORER.stat_names)))
    matrix[:, SCORER.stat_names.index("n_prompts")] = 1
    matrix[:, SCORER.stat_names.index("n_rel")] = 1
    matrix[:right, SCORER.stat_names.index("map")] = 1
    return PerPrompt.from_matrix(SCORER, [f"p{i}" for i in range(N)], matrix)


@pytest.mark.parametrize("n_samples, alpha, refused", [
    (1000, 0.0001, True),  # the case: 1 / 1001 = 0.000999
    (1000, 1 / 1001, True),  # p = 1 / 1001 is no p below it
    (1000, 0.001, False),
    (19, 0.05, True),  # 1 / 20
    (19, 0.0501, False),
    (99, 0.01, True),
])
def test_an_alpha_the_resamples_cannot_reach_is_refused_with_the_numbers(n_samples, alpha, refused):
    """paired_test's p-value is (c + 1) / (N + 1): at least 1 / (N + 1), and significant below alpha."""
    for rule in ("significant", "proportional", "declined"):
        if refused:
            with pytest.raises(InputError, match=rf"alpha {alpha} is out of reach: with {n_samples} paired-bootstrap "
                                                 rf"resamples the smallest p-value is 1 / \({n_samples} \+ 1\) = "
                                                 rf"{1 / (n_samples + 1):.4g}"):
                EarlyStopping("map", rule, 3, alpha=alpha, n_samples=n_samples)
        else:
            EarlyStopping("map", rule, 3, alpha=alpha, n_samples=n_samples)


def test_alpha_just_above_the_smallest_p_value_sees_an_improvement():
    """19 resamples: the smallest p-value is 1/20 = 0.05; all 20 prompts right against none gives it,
    so alpha 0.0501 counts the improvement (the bound is exact, not conservative)."""
    rule = EarlyStopping("map", "significant", 3, alpha=0.0501, n_samples=19, warmup=0)
    state, _ = rule.decide(State(), stats=validation(0))
    _, decision = rule.decide(state, stats=validation(20))
    assert math.isclose(decision.p_value, 1 / 20) and decision.improved


def test_a_rule_that_tests_nothing_takes_any_alpha():
    """strict without the warm-up until significant never tests: its alpha is not used."""
    assert EarlyStopping("map", "strict", 3, alpha=0.0001).alpha == 0.0001
    with pytest.raises(InputError, match="out of reach"):
        EarlyStopping("map", "strict", 3, alpha=0.0001, warmup="significant")


def test_replace_keeps_the_check():
    """dataclasses.replace re-runs __post_init__: a rule cannot be given an unreachable alpha later."""
    with pytest.raises(InputError, match="out of reach"):
        replace(EarlyStopping("map"), alpha=0.0005)
