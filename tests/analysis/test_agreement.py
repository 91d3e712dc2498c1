"""Ranking agreement coefficients on hand-computed cases, and the systems table files."""

import json
import math

import pytest

from nbest_eval import InputError
from nbest_eval.analysis.agreement import (
    COEFFICIENTS,
    agreement,
    kendall,
    pearson_rank,
    pearson_rank_sym,
    spearman,
    tau_ap,
)
from nbest_eval.analysis.systems import System, SystemTable, read_table, write_table

REFERENCE = [5, 4, 3, 2, 1]
SWAP_TOP = [4, 5, 3, 2, 1]
SWAP_BOTTOM = [5, 4, 3, 1, 2]


def test_one_swap_at_the_top_costs_tau_ap_more_than_one_at_the_bottom():
    # Spearman 1 - 6*2/(5*24), Kendall (9-1)/10: blind to where the swap is
    for swapped in (SWAP_TOP, SWAP_BOTTOM):
        assert spearman(REFERENCE, swapped) == pytest.approx(0.9)
        assert kendall(REFERENCE, swapped) == pytest.approx(0.8)
    # top swap: C(2)/1 = 0, then 1 + 1 + 1 -> 2/4 * 3 - 1; bottom: 1 + 1 + 1 + 3/4 -> 2/4 * 3.75 - 1
    assert tau_ap(REFERENCE, SWAP_TOP) == pytest.approx(0.5)
    assert tau_ap(REFERENCE, SWAP_BOTTOM) == pytest.approx(0.875)
    assert pearson_rank(REFERENCE, SWAP_TOP) < pearson_rank(REFERENCE, SWAP_BOTTOM) < 1


def test_tau_ap_is_asymmetric_and_walks_the_estimate():
    x, y = [3, 2, 1], [2, 1, 3]
    # by y: c, a, b. a: c not above in x (0/1); b: a above (1/2) -> 2/2 * 0.5 - 1
    assert tau_ap(x, y) == pytest.approx(-0.5)
    # by x: a, b, c. b: a above in y too (1/1); c: neither above in y (0/2) -> 2/2 * 1 - 1
    assert tau_ap(y, x) == pytest.approx(0.0)


def test_tau_ap_ties():
    assert tau_ap([3, 3, 2, 1], [3, 3, 2, 1]) == 1.0
    # a, b tie under the walked y: only c is walked, against both: 1 of 2 above under x -> 2/1 * 0.5 - 1
    assert tau_ap([3, 1, 2], [2, 2, 1]) == pytest.approx(0.0)
    assert tau_ap([1, 3, 2], [2, 2, 1]) == pytest.approx(0.0)
    assert tau_ap([3, 2, 1], [2, 2, 1]) == pytest.approx(1.0)
    # a pair that x ties does not agree: b gets 0/1, c 2/2 -> 2/2 * 1 - 1
    assert tau_ap([2, 2, 1], [3, 2, 1]) == pytest.approx(0.0)


def test_tau_ap_matches_the_literal_formula_without_ties():
    import random
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(2, 9)
        x, y = rng.sample(range(100), n), rng.sample(range(100), n)
        order = sorted(range(n), key=lambda i: -y[i])  # the estimate's ranking, walked
        total = sum(sum(x[order[j]] > x[order[i]] for j in range(i)) / i for i in range(1, n))
        assert tau_ap(x, y) == pytest.approx(2 / (n - 1) * total - 1)


def test_pearson_rank_hand_computed():
    # normalized x = [1, .5, .25, 0], y = [1, .25, .5, 0]; by x: r_2 = 1 (one pair, same sign);
    # r_3: gaps x (-.75, -.25), y (-.5, .25): .3125 / sqrt(.625 * .3125) = 1/sqrt(2); weights .5, .25
    x, y = [4, 2, 1, 0], [4, 1, 2, 0]
    assert pearson_rank(x, y) == pytest.approx((0.5 + 0.25 / math.sqrt(2)) / 0.75)
    # y = [2, 4, 1, 0] -> [.5, 1, .25, 0]: r_2 = -1, r_3 = .375 / .625 = .6
    assert pearson_rank(x, [2, 4, 1, 0]) == pytest.approx((0.5 * -1 + 0.25 * 0.6) / 0.75)


def test_pearson_rank_properties():
    x, y = [0.31, 0.2, 0.45, 0.12, 0.28], [20.1, 18.0, 25.5, 9.9, 24.0]
    assert pearson_rank(x, x) == pytest.approx(1.0)
    assert pearson_rank(x, [-v for v in x]) == pytest.approx(-1.0)
    # min-max normalization: invariant under positive affine maps of either measure
    assert pearson_rank([3 * v + 1 for v in x], [v / 100 - 2 for v in y]) == pytest.approx(pearson_rank(x, y))
    assert pearson_rank(x, y) != pytest.approx(pearson_rank(y, x))
    assert pearson_rank_sym(x, y) == pytest.approx((pearson_rank(x, y) + pearson_rank(y, x)) / 2)
    # gap-sensitive: the same ranking with a larger gap at the swap agrees less
    assert pearson_rank([4, 3, 2, 1, 0], [3.9, 4, 2, 1, 0]) > pearson_rank([4, 3, 2, 1, 0], [2.1, 4, 2, 1, 0])
    assert pearson_rank([1, 0], [1, 0]) is None  # the worst system weighs 0: nothing left


def test_undefined_and_missing_values():
    for name, fn in COEFFICIENTS.items():
        assert fn([1, 1, 1], [1, 2, 3]) is None, name
        assert fn([1, 2, 3], [2, 2, 2]) is None, name
    result = agreement([3, None, 2, 1], [3, 5, None, 1])
    assert result["n"] == 2 and result["spearman"] == pytest.approx(1.0)
    assert agreement([1, None], [None, 2]) == {"spearman": None, "kendall": None, "tau_ap": None,
                                                "pearson_rank": None, "n": 0}
    with pytest.raises(InputError, match="unknown coefficient 'tau'"):
        agreement([1, 2], [1, 2], ["tau"])


def test_agreement_stays_within_its_bounds():
    x = [0.1, 0.37, 0.52, 0.9, 0.23, 0.71]  # Pearson Rank of a ranking with itself: 1.0000000000000002 unbounded
    assert all(v is None or -1 <= v <= 1 for k, v in agreement(x, x, ["pearson_rank", "pearson_rank_sym"]).items()
               if k != "n")
    assert agreement(x, x, ["pearson_rank"])["pearson_rank"] == 1.0


def table() -> SystemTable:
    return SystemTable([System("a", {"map": 0.5, "bleu_1x1": None}, "runs/a.txt"),
                        System("b, c", {"map": 0.25, "bleu_1x1": 12.5})], {"metric": "map", "best": "a"})


def test_systems_table_round_trips(tmp_path):
    write_table(table(), tmp_path / "t.json")
    back = read_table(tmp_path / "t.json")
    assert back.systems == table().systems and back.extra == {"metric": "map", "best": "a"}
    assert json.loads((tmp_path / "t.json").read_text())["best"] == "a"
    write_table(table(), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[:2] == ["system,map,bleu_1x1", "a,0.5,"]
    back = read_table(tmp_path / "t.csv")
    assert [(s.name, s.values) for s in back.systems] == [(s.name, s.values) for s in table().systems]
    assert back.column("bleu_1x1") == [None, 12.5]


def test_systems_table_errors(tmp_path):
    path = tmp_path / "t.json"
    write_table(table(), path)
    with pytest.raises(InputError, match="t.json: already exists"):
        write_table(table(), path)
    write_table(table(), path, overwrite=True)
    with pytest.raises(InputError, match="t.json: unknown measure 'ndcg'; the table has: map, bleu_1x1"):
        read_table(path).column("ndcg")
    bad = {"x.csv": ("system,map\na,0.1\na,0.2\n", "duplicate system name 'a'"),
           "y.csv": ("system,map\na,high\n", r"y.csv:2: map: 'high' is not a number"),
           "z.csv": ("name,map\n", 'expected a CSV header "system,'),
           "w.json": ('{"systems": [{"name": "a", "values": {"map": "x"}}]}', "is not a finite number"),
           "v.json": ('{"systems": 3}', 'expected an object with a "systems" list')}
    for name, (text, message) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match=message):
            read_table(tmp_path / name)
    with pytest.raises(InputError, match="missing.json: cannot read"):
        read_table(tmp_path / "missing.json")
