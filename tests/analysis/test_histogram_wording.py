"""The precision histogram's legend counts prompts in English (issue 31 trial): "1 prompt", not "1 prompts"."""

from nbest_eval.analysis import plots
from nbest_eval.analysis.recall_precision import draw_histogram


def test_one_prompt_is_singular(monkeypatch, tmp_path):
    drawn = {}
    monkeypatch.setattr(plots, "difference_bars", lambda values, path, **labels: drawn.update(labels))
    histogram = {"system": "a", "baseline": "b", "measure": "rprec", "differences": [0.5, 0.0, -0.5, -0.25],
                 "system_better": 1, "baseline_better": 2, "equal": 1}
    draw_histogram(histogram, str(tmp_path / "h.png"), "bs", 0.5)
    assert drawn["above"] == "a better: 1 prompt" and drawn["below"] == "b better: 2 prompts"
