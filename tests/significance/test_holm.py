"""Holm's step-down correction, by hand and across the systems of one measure."""

import re

import pytest
from significance_cases import per_prompt, systems

from nbest_eval import InputError, Scorer
from nbest_eval.significance import holm, paired_test


def test_holm_by_hand():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, None, 0.9]) == [pytest.approx(1.0), None, pytest.approx(1.0)]
    assert holm([]) == []


def test_holm_applies_across_the_systems_of_one_measure():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "base")
    others = [per_prompt(scorer, gold, nbest, f"s{i}") for i, nbest in enumerate(lists[1:])]
    result = paired_test(base, others, "bs")
    raw = [result[s.name]["map"].p_value for s in others]
    assert [result[s.name]["map"].p_holm for s in others] == pytest.approx(
        [min(1.0, 2 * min(raw)) if p == min(raw) else max(min(1.0, 2 * min(raw)), p) for p in raw])


REFUSED = {  # p-values -> what the InputError says
    "holm given NaN": ([0.1, float("nan")], "a p-value must be"),
    "holm given 1.5": ([1.5], "a p-value must be"),
    "holm given a string": (["0.01"], "a p-value must be"),
}


@pytest.mark.parametrize("values, message", REFUSED.values(), ids=REFUSED.keys())
def test_holm_refuses_what_is_no_p_value(values, message):
    with pytest.raises(InputError, match=re.escape(message)):
        holm(values)
