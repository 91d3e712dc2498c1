"""compare ranks each measure's systems in its own better direction (issue 31 trial): E = 1 - F is
lower-is-better, so it must agree with the reference exactly as F does, and tau_AP / Pearson Rank
must weigh its best systems, not its worst."""

import json

import pytest
from scipy import stats

from nbest_eval.analysis.agreement import DEFAULT_COEFFICIENTS, agreement, better_up
from nbest_eval.analysis.systems import System, SystemTable, write_table
from nbest_eval.cli import main

#: five systems' F_2 and MAP, by hand: MAP orders them 0 1 2 3 4, F_2 0 2 1 3 4 (a swap below the head)
F2 = [0.9, 0.5, 0.6, 0.3, 0.1]
E2 = [1 - f for f in F2]
MAP = [0.8, 0.7, 0.6, 0.5, 0.4]


def test_an_error_rate_agrees_as_its_complement_does():
    as_f = agreement(MAP, F2, keys=("map", "f2"))
    as_e = agreement(MAP, E2, keys=("map", "e2"))
    assert as_e == pytest.approx(as_f)
    assert as_e["spearman"] == pytest.approx(stats.spearmanr(MAP, F2).statistic)
    # tau_AP by hand, walking F2's (and E2's best-first) order 0 2 1 3 4: system 2 has 0 above it in MAP's
    # order too (1/1), 1 has 0 but not 2 (1/2), 3 and 4 all above (1, 1): 2/4 * 3.5 - 1
    assert as_e["tau_ap"] == pytest.approx(0.75)


def test_the_reference_may_be_the_error_rate():
    assert agreement(E2, MAP, keys=("e2", "map")) == pytest.approx(agreement(F2, MAP, keys=("f2", "map")))
    assert agreement(E2, F2, keys=("e2", "f2"))["tau_ap"] == pytest.approx(1.0)


def test_counts_and_columns_that_are_no_measure_are_taken_as_they_are():
    values = [3.0, None, 1.0]
    assert better_up("num_ret", values) == values and better_up("loss", values) == values
    assert better_up("e0.5", values) == [-3.0, None, -1.0]


def test_compare_reads_each_measure_in_its_direction(tmp_path, capsys):
    scores = tmp_path / "scores.json"
    write_table(SystemTable([System(f"s{i}", {"map": m, "f2": f, "e2": e}) for i, (m, f, e)
                             in enumerate(zip(MAP, F2, E2))]), scores)
    assert main(["compare", "--scores", str(scores), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["agreement"]
    for coefficient in DEFAULT_COEFFICIENTS:
        assert result["e2"][coefficient] == pytest.approx(result["f2"][coefficient]), coefficient
    assert result["e2"]["spearman"] > 0


def test_the_ablation_ranks_an_error_rate_as_its_complement():
    """ablate's agreement of the full gold's ranking with an ablated gold's: E's equals F's."""
    from cases import random_case

    from nbest_eval import Scorer
    from nbest_eval.analysis.ablation import ablate

    gold, _ = random_case(3, n_prompts=30, nil_prompts=False)
    runs = [(f"s{seed}", None, random_case(seed, n_prompts=30)[1]) for seed in (3, 4, 5, 6)]
    result = ablate(gold, runs, lambda: Scorer(["f2", "e2"]), fractions=(0.3,), coefficients=DEFAULT_COEFFICIENTS)
    assert result.agreement[0.3]["e2"] == pytest.approx(result.agreement[0.3]["f2"])
