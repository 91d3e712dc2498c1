"""NBestEarlyStoppingCallback's measure is checked when the callback is made: "mapp" is refused, with a "did you mean",
as a metric_for_best_model typo is (not at train begin, with only the keys the n-best callback computes)."""

import pytest

pytest.importorskip("transformers")
hf = pytest.importorskip("nbest_eval.hf")

from nbest_eval.metrics import UnknownMetric  # noqa: E402


@pytest.mark.parametrize("metric", ["mapp", "eval_mapp"])
def test_a_misspelled_measure_is_refused_at_creation_with_a_hint(metric):
    hint = r"NBestEarlyStoppingCallback: unknown metric 'mapp' \(did you mean map\?\)"
    with pytest.raises(UnknownMetric, match=hint):
        hf.NBestEarlyStoppingCallback(metric)


@pytest.mark.parametrize("metric", ["map", "eval_map", "bleu_1x1", "wf1"])
def test_measures_are_accepted(metric):
    assert hf.NBestEarlyStoppingCallback(metric).stopping.key == metric.removeprefix("eval_")
