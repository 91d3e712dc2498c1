"""Issue 34's trial, messages: the exact alpha bound, select's --n-samples in the stopping replay,
clipped huge numbers."""

import math

import pytest

from nbest_eval.cli import main
from nbest_eval.data import Gold, GoldPrompt, InputError
from nbest_eval.formats import write_gold
from nbest_eval.training.early_stopping import EarlyStopping


def test_the_alpha_bound_is_printed_exactly():
    """1000 resamples: the smallest p-value is 1/1001 = 0.000999000999...; 0.0009990005 lies below it
    and is refused, so the bound said must not read 0.000999; the float just above it is taken."""
    bound = 1 / 1001
    with pytest.raises(InputError) as refused:
        EarlyStopping("map", "significant", 3, alpha=0.0009990005)
    said = str(refused.value).split("use an alpha above ")[1]
    assert said == "1 / 1001 = 0.000999000999000999 (exactly)"
    assert float(said.split(" = ")[1].split()[0]) == bound
    EarlyStopping("map", "significant", 3, alpha=math.nextafter(bound, 1))


def select_stopping(tmp_path, capsys, *options):
    gold = tmp_path / "gold.txt"
    if not gold.exists():
        write_gold(Gold([GoldPrompt("p1", "hi", (("olá", 1.0),))]), gold)
    main(["select", str(tmp_path), "--from-nbest", "--gold", str(gold), "--patience", "3", *options])
    return capsys.readouterr().err


def test_select_n_samples_reaches_the_stopping_replay(tmp_path, capsys):
    """--n-samples 20000 puts --alpha 0.0001 within the replay's reach (1 / 20001 < 0.0001); with 2000
    the refusal counts 2000 resamples, not the default 1000."""
    assert "out of reach" not in select_stopping(tmp_path, capsys, "--alpha", "0.0001", "--n-samples", "20000")
    err = select_stopping(tmp_path, capsys, "--alpha", "0.0001", "--n-samples", "2000")
    assert "alpha 0.0001 is out of reach: with 2000 paired-bootstrap resamples" in err, err


# -- select's cache: per-prompt bounds --------------------------------------------------------------------

def test_a_cached_ap_above_what_the_list_can_reach_is_refused():
    """One hypothesis, a valid one, against 3 valid translations: AP = (1/1) / 3 = 1/3 (hand-computed),
    the most a 1-long list can reach; an entry saying AP 1.0 (its values made to agree) is refused."""
    from nbest_eval.scorer import Scorer
    from nbest_eval.selection.cache_entry import CacheEntry, relevance
    from nbest_eval.stats import Stats

    scorer = Scorer(["map"])
    gold = Gold([GoldPrompt("p1", "a cat", (("um gato", 0.5), ("uma gata", 0.3), ("o gato", 0.2)))])
    good = CacheEntry.of(scorer.score(gold, {"p1": ["um gato"]}, keep_per_prompt=True), scorer).as_json()
    assert relevance(scorer, gold) == [3]
    assert math.isclose(good["values"]["map"], 1 / 3)
    assert CacheEntry.verified(good, scorer, relevance(scorer, gold)).values == good["values"]
    row = list(good["stats"][0])
    row[scorer.stat_names.index("map")] = 1.0
    forged = {**good, "stats": [row], "values": scorer.values(Stats.from_vector(scorer.stat_names, row))}
    assert forged["values"]["map"] == 1.0
    with pytest.raises(ValueError, match=r"prompt 1: its map 1 is above what 1 hypotheses can reach with 3 valid "
                                         r"translations, min\(1, 3\) / 3"):
        CacheEntry.verified(forged, scorer, relevance(scorer, gold))


def test_a_cached_nbest_size_of_over_40_digits_is_said_so():
    """read_cache reads a 400-digit integer as infinite: the message says so, not 'inf'."""
    from nbest_eval.scorer import Scorer
    from nbest_eval.selection.cache_entry import CacheEntry, relevance

    scorer = Scorer(["map"])
    gold = Gold([GoldPrompt("p1", "a cat", (("um gato", 1.0),))])
    good = CacheEntry.of(scorer.score(gold, {"p1": ["um gato"]}, keep_per_prompt=True), scorer).as_json()
    with pytest.raises(ValueError, match=r"^nbest_size of over 40 digits \(or Infinity\) is not the longest list, 1$"):
        CacheEntry.verified({**good, "nbest_size": math.inf}, scorer, relevance(scorer, gold))
