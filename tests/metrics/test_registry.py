"""Metric keys as the registry reads them: which way each measure is better, declared where it
registers (what selects or stops on a key must not maximize an error rate, e{b}, or select on a
count, num_ret); and an unknown key close to a real one says what it was likely meant as: the number
spelled as keys spell it, the levels a pattern allows, or the closest key by spelling."""

import pytest

from nbest_eval import Scorer
from nbest_eval.cli import main
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


@pytest.mark.parametrize("key, hint", [
    ("f2.0", "(did you mean f2?)"), ("e0.50", "(did you mean e0.5?)"), ("f1.0", "(did you mean f1?)"),
    ("iprec1.00", "(did you mean iprec1.0?)"), ("iprec.5", "(did you mean iprec0.5?)"),
    ("p10.0", "(did you mean p10?)"), ("bleu_1x1.0", "(did you mean bleu_1x1?)"),
    ("iprec0.25", "(did you mean iprec{r}: interpolated precision at recall level r = 0.0, 0.1, ..., 1.0?)"),
    ("p0", "(did you mean p{k}: precision at rank k"), ("mapp", "(did you mean map?)")])
def test_a_close_key_gets_a_hint(key, hint):
    for build in (lambda: Scorer([key]), lambda: higher_is_better(key)):
        with pytest.raises(UnknownMetric) as raised:
            build()
        assert f"unknown metric {key!r} {hint}" in str(raised.value)


@pytest.mark.parametrize("key", ["nope", "x" * 60 + "1.0", "zzz9"])
def test_a_key_close_to_none_gets_the_plain_message(key):
    with pytest.raises(UnknownMetric) as raised:
        Scorer([key])
    assert "did you mean" not in str(raised.value) and "valid keys: map" in str(raised.value)


def test_a_hint_never_names_another_number():
    """0.25 is no level: the hint is the pattern with its levels, never iprec0.2 or iprec0.3."""
    with pytest.raises(UnknownMetric) as raised:
        Scorer(["iprec0.25"])
    assert "iprec0.2?" not in str(raised.value) and "iprec0.3?" not in str(raised.value)


def test_score_shows_the_hint(tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("p|x\na|1.0\n\n", encoding="utf-8")
    nbest = tmp_path / "n.tsv"
    nbest.write_text("p\t1\t-1\ta\n", encoding="utf-8")
    assert main(["score", "--gold", str(gold), "--nbest", str(nbest), "--metrics", "f2.0"]) == 2
    assert "unknown metric 'f2.0' (did you mean f2?)" in capsys.readouterr().err


def test_compare_shows_the_hint_before_reading(tmp_path, capsys):
    argv = ["compare", "--gold", str(tmp_path / "none.txt"), "--nbest", "a", "b", "--metrics", "map,iprec1.00"]
    assert main(argv) == 2
    assert "--metrics: unknown metric 'iprec1.00' (did you mean iprec1.0?)" in capsys.readouterr().err
