"""Saved early-stopping states (training.stopping_state): what the rule restores as it was, and what
it refuses before it goes on from one.

A state that a checkpoint saved is input: edited, damaged, of another measure or of another run. Each
case here must end in one InputError that names what is wrong (the adapters drop the state with one
warning and train on from a fresh one), never in a TypeError, IndexError, ValueError, OverflowError,
AttributeError or KeyError from deep inside, and never in silently wrong decisions. The statistics
are hand-built as in test_early_stopping.py: a validation of 20 prompts gets the first ``right`` of
them right (AP 1, else 0), so its MAP is right / 20.
"""

import json

import numpy as np
import pytest

from nbest_eval import InputError, Scorer
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import RULES, EarlyStopping, State

N = 20
IDS = [f"p{i}" for i in range(N)]
SCORER = Scorer(["map", "bleu_1x1"])
MAP_STATS = ["n_prompts", "n_rel", "n_empty", "n_hyps", "map"]
STEP = 30  # the current step when training resumes: validations at steps 10, 20, 30


def validation(right, scorer=SCORER, ids=IDS):
    matrix = np.zeros((len(ids), len(scorer.stat_names)))
    matrix[:, scorer.stat_names.index("n_prompts")] = 1
    matrix[:, scorer.stat_names.index("n_rel")] = 1
    if "map" in scorer.stat_names:
        matrix[:right, scorer.stat_names.index("map")] = 1
    return PerPrompt.from_matrix(scorer, ids, matrix)


def decided(rule, rights, key="map", scorer=SCORER, **options):
    """The state after validations getting ``rights`` prompts right, at steps 10, 20, ..."""
    stopping, state = EarlyStopping(key, rule, 3, **options), State()
    for i, right in enumerate(rights, 1):
        state, _ = stopping.decide(state, stats=validation(right, scorer), step=10 * i)
    return state


#: significant, then one without improvement: seen 3, reference 1 (MAP 0.5), kept 1 (step 20), runs 1
SAVED = decided("significant", [0, 10, 10]).to_dict()


def saved(**changes):
    return {**json.loads(json.dumps(SAVED)), **changes}


def without(name):
    return {k: v for k, v in SAVED.items() if k != name}


def rows(width=5, height=N, value=0.0):  # 5: map's statistics
    return [[value] * width for _ in range(height)]


HUGE = 10 ** 400  # a 400-digit integer: no float holds it
NAN = float("nan")

# (case, saved state, what the error must say): each InputError, from EarlyStopping("map", "significant", 3)
CASES = [
    # class 1: not a state at all, or a field of the wrong type or shape
    ("a string", "abc", "a str, not a dict"),
    ("a list", [SAVED], "a list, not a dict"),
    ("nothing", None, "a NoneType, not a dict"),
    ("a missing key", without("runs"), "no runs"),
    ("an unknown key", saved(x=1), "unknown 'x'"),
    ("a flag that is a string", saved(warming_up="yes"), "warming_up 'yes'"),
    ("a flag that is a number", saved(stopped=1), "stopped 1"),
    ("a count that is a string", saved(runs="abc"), "runs 'abc'"),
    ("a step that is a float", saved(kept_step=20.0), "kept_step 20.0"),
    ("ragged rows", saved(reference_rows=[[1.0], [1.0, 2.0]]), "reference_rows"),
    ("rows that are no list", saved(reference_rows="x"), "reference_rows 'x'"),
    ("rows a column short", saved(reference_rows=rows(width=4)), "reference_rows are 20 x 4, not 20 prompts x 5"),
    ("rows a prompt short", saved(reference_rows=rows(height=N - 1)), "reference_rows are 19 x 5, not 20 prompts"),
    ("no rows at all", saved(reference_rows=None), "no statistics of the reference validation"),
    ("a 400-digit seen", saved(seen=HUGE), "seen 1000000000000000000000000000000000000000... (401 characters)"),
    ("a 400-digit kept_step", saved(kept_step=HUGE), "kept_step 10000000000000000000000000000000000000"),
    ("a 400-digit value", saved(reference_value=HUGE), "reference_value 1000000000"),
    ("a 400-digit statistic", saved(reference_rows=rows(value=HUGE)), "reference_rows"),
    ("a 400-digit runs", saved(runs=HUGE), "runs 1000000000"),
    # class 2: fields of the right type that do not hold together
    ("an edited reference_value", saved(reference_value=0.99), "reference_value 0.99 is not its statistics' map, 0.5"),
    ("an edited kept_value", saved(kept_value=0.99), "kept_value 0.99 is not the reference's value 0.5"),
    ("a NaN best", saved(reference_value=NAN, kept_value=NAN), "reference_value nan"),
    ("a NaN statistic", saved(reference_rows=rows(value=NAN)), "reference_rows"),
    ("runs -100", saved(runs=-100), "runs -100"),
    ("more runs than validations", saved(runs=3), "runs 3"),
    ("more runs than since the reference", saved(runs=2), "runs 2 are more than the 1 validation(s) after"),
    ("kept_step 999", saved(kept_step=999), "kept_step 999 is not a step from 0 to the current 30"),
    ("kept_step -7", saved(kept_step=-7), "kept_step -7 is not a step from 0"),
    ("no kept_step", saved(kept_step=None), "kept_step None"),
    ("kept beyond seen", saved(kept=3), "kept 3"),
    ("kept before the reference", saved(kept=0), "reference 1 and kept 0 are not 0 <= reference <= kept"),
    ("more validations than steps", saved(seen=STEP + 2), f"seen {STEP + 2} validations by step {STEP}"),
    ("stopped while warming up", saved(warming_up=True, stopped=True), "stopped while warming up"),
    ("a floor after warm-up", saved(floor_rows=rows()), "floor_rows kept after warm-up"),
    ("nothing seen, something kept", saved(seen=0, runs=0, reference=None, kept=None), "no validation seen"),
    ("another measure", saved(measure="bleu_100x100|tok:13a|case:mixed|smooth:exp"),
     "its statistics are of bleu_100x100|tok:13a|case:mixed|smooth:exp, not map"),
    ("another layout", saved(statistics=[*MAP_STATS[:4], "rr"]),
     "its statistics are n_prompts, n_rel, n_empty, n_hyps, rr"),
    ("other prompts", saved(prompts="0" * 64), "other prompts"),
]


@pytest.mark.parametrize("data, message", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_damaged_or_inconsistent_state_is_refused_naming_what(data, message):
    with pytest.raises(InputError) as error:
        EarlyStopping("map", "significant", 3).restore(data, SCORER, IDS, STEP)
    assert message in str(error.value)


def test_the_saved_state_itself_is_restored_as_it_was():
    """The control for the table: the undamaged state passes, unchanged."""
    assert EarlyStopping("map", "significant", 3).restore(saved(), SCORER, IDS, STEP) == State.from_dict(SAVED)
    assert EarlyStopping().restore(State().to_dict(), SCORER, IDS, 0) == State()


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("rights", [[0, 0, 0, 0, 0, 0], [0, 10, 10, 12, 20, 20, 20, 19, 20, 5, 5, 5, 5],
                                    [20, 15, 10, 5, 0, 0, 0, 0]])
def test_every_state_a_rule_reaches_is_restored_as_it_was(rule, rights):
    """No false alarm: each state of a run (warm-up, ties, runs, stops, a decline) passes, unchanged."""
    for warmup in (None, 0, 2):
        stopping, state = EarlyStopping("map", rule, 2, warmup=warmup), State()
        for i, right in enumerate(rights, 1):
            state, _ = stopping.decide(state, stats=validation(right), step=10 * i)
            assert stopping.restore(json.loads(json.dumps(state.to_dict())), SCORER, IDS, 10 * i) == state


def test_a_state_records_the_measure_and_the_layout_it_is_of():
    assert (SAVED["measure"], SAVED["statistics"]) == ("map", MAP_STATS)
    wf1 = decided("significant", [0, 10], key="wf1", scorer=Scorer(["wf1"], wf1_top=1))
    assert wf1.measure == "wf1|trunc:top1"
    with pytest.raises(InputError, match=r"of wf1\|trunc:top1, not wf1\|trunc:none"):
        EarlyStopping("wf1", "significant", 3).restore(wf1.to_dict(), Scorer(["wf1"]), IDS, STEP)


def test_a_bleu_100x100_state_is_no_bleu_1x1_state():
    """The case of the issue: a frozen model "improved (p = 0.000999)" on a state of another BLEU."""
    bleu = Scorer(["bleu_1x1", "bleu_100x100"])
    state = decided("significant", [0, 0], key="bleu_100x100", scorer=bleu)
    with pytest.raises(InputError, match="of bleu_100x100.*not bleu_1x1"):
        EarlyStopping("bleu_1x1", "significant", 3).restore(state.to_dict(), bleu, IDS, STEP)


def test_an_earlier_versions_state_gets_this_runs_measure_when_its_statistics_fit():
    """A state saved before states recorded their measure and layout: accepted when its rows are this
    measure's width and give its values (then it records them), refused otherwise."""
    old = {k: v for k, v in SAVED.items() if k not in ("measure", "statistics")}
    restored = EarlyStopping("map", "significant", 3).restore(old, SCORER, IDS, STEP)
    assert restored == State.from_dict(SAVED)
    with pytest.raises(InputError, match="reference_value 0.99 is not its statistics' map, 0.5"):
        EarlyStopping("map", "significant", 3).restore({**old, "reference_value": 0.99}, SCORER, IDS, STEP)
    with pytest.raises(InputError, match="reference_rows are 20 x 5, not 20 prompts x 14"):
        EarlyStopping("bleu_1x1", "significant", 3).restore(old, SCORER, IDS, STEP)


def test_a_restored_state_decides_as_the_saved_one():
    rule = EarlyStopping("map", "significant", 3)
    restored = rule.restore(saved(), SCORER, IDS, STEP)
    assert rule.decide(restored, stats=validation(20)) == rule.decide(State.from_dict(SAVED), stats=validation(20))
