"""Which way each measure is better, declared where it registers: what selects or stops on a key
must not maximize an error rate (e{b}) or select on a count (num_ret)."""

import pytest

from nbest_eval.metrics import REGISTRY, UnknownMetric, higher_is_better

LOWER = {"e{b}"}
COUNTS = {"num_ret", "num_rel", "num_rel_ret"}


def test_every_quality_measure_but_the_error_rates_is_higher_is_better():
    for spec in REGISTRY:
        expected = None if spec.pattern in COUNTS else spec.pattern not in LOWER
        assert spec.higher_is_better is expected, spec.pattern


@pytest.mark.parametrize("key, expected", [("map", True), ("p10", True), ("bleu_1x1", True), ("wf1", True)])
def test_higher_is_better_by_key(key, expected):
    assert higher_is_better(key) is expected


def test_an_unknown_key_has_no_direction():
    with pytest.raises(UnknownMetric, match="unknown metric 'nope'"):
        higher_is_better("nope")
