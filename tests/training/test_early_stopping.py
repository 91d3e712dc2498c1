"""The early-stopping rules on hand-built curves (a warm-up of zeros, a rise, a noisy plateau, a slow
creep), ``strict`` against fairseq's own should_stop_early, and the rule's state as a checkpoint keeps it.

A curve is a list of validations of 200 prompts; a validation's MAP is the share of prompts it gets
right (AP 1, else 0), and which prompts it gets right is chosen, so what a paired test over prompts
must say is known: a validation that gets 16 more prompts right than another is significantly better
(p about 0.001), one that gets 2 more or the same number of others right is not.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbest_eval import InputError, Scorer
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import RULES, EarlyStopping, State

N = 200
SCORER = Scorer(["map", "bleu_1x1"])  # the rule reads its measure's columns only


def validation(right, offset=0):
    """A validation that gets prompts offset .. offset + right - 1 right."""
    matrix = np.zeros((N, len(SCORER.stat_names)))
    matrix[:, SCORER.stat_names.index("n_prompts")] = 1
    matrix[:, SCORER.stat_names.index("n_rel")] = 1
    matrix[offset:offset + right, SCORER.stat_names.index("map")] = 1
    return PerPrompt.from_matrix(SCORER, [f"p{i}" for i in range(N)], matrix)


def curve(*points):
    """validation() of each point: an int (prompts right, from the first) or (right, offset)."""
    return [validation(*p) if isinstance(p, tuple) else validation(p) for p in points]


def replay(rule, validations, patience=3, **options):
    decisions, stopped = EarlyStopping("map", rule, patience, **options).replay([None] * len(validations),
                                                                               validations)
    return decisions, stopped


WARMUP_AND_RISE = curve(0, 0, 0, 0, 1, 20, 40, 60)
PLATEAU = curve(0, 20, 40, 60, (61, 1), (60, 2), (61, 0), (60, 1), (60, 3), 60)  # 61 > 60, never significantly
CREEP = curve(0, 20, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50)  # +1 a validation after a rise


def test_strict_stops_in_the_warm_up_and_the_default_does_not():
    """MAP is 0 until the model gets a first translation right: strict counts those as no progress."""
    assert replay("strict", WARMUP_AND_RISE)[1] == 3
    decisions, stopped = replay("significant", WARMUP_AND_RISE)
    assert stopped is None
    # warming up until significantly above the first: 1 right out of 200 is not, 20 is
    assert [d.warming_up for d in decisions] == [True] * 5 + [False] * 3
    assert [d.improved for d in decisions] == [True, False, False, False, False, True, True, True]
    assert decisions[-1].kept == 7 and all(d.runs == 0 for d in decisions)
    assert replay("declined", WARMUP_AND_RISE)[1] is None


def test_a_fixed_warm_up_counts_no_patience_in_its_validations():
    assert replay("strict", WARMUP_AND_RISE, warmup=4)[1] is None
    assert replay("strict", WARMUP_AND_RISE, warmup=3)[1] is None  # the 4th zero is run 1, then a rise
    assert replay("strict", curve(0, 0, 0, 0, 0, 0), warmup=2)[1] == 4


def test_on_a_noisy_plateau_strict_follows_noise_and_significant_stops():
    """61 beats 60 by one prompt: strict calls it progress and keeps going; the significant rule
    stops 3 validations after the last significant rise and keeps that rise (60 at index 3)."""
    decisions, stopped = replay("significant", PLATEAU)
    assert stopped == 6 and decisions[-1].kept == 5  # (60, 2) ties the rise's 60 exactly: the latest is kept
    assert [d.runs for d in decisions[4:]] == [1, 2, 3]
    assert all(d.p_value > 0.05 for d in decisions[4:])
    strict, stopped = replay("strict", PLATEAU)
    assert stopped == 7 and strict[-1].kept == 6  # 61 at 4, then 60, 61 (a tie: kept), 60: 3 runs
    assert replay("declined", PLATEAU)[1] is None  # nothing is significantly worse than the best


def test_a_slow_creep_is_progress_once_it_adds_up():
    """+1 prompt a validation: each is no significant progress over the last, +3 together are. With
    patience 2 the significant rule stops before they add up, with 3 it follows the creep in steps
    of 3; nothing is significantly worse than the best, so declined never stops."""
    decisions, stopped = replay("significant", CREEP, patience=2)
    assert stopped == 4 and decisions[-1].kept == 2 and all(d.p_value > 0.05 for d in decisions[3:])
    decisions, stopped = replay("significant", CREEP, patience=3)
    assert stopped is None and [d.index for d in decisions if d.improved and d.index > 2] == [5, 8, 11]
    assert all(d.p_value < 0.05 for d in decisions if d.improved and d.index > 0)
    assert replay("declined", CREEP)[1] is None


def test_proportional_waits_as_long_as_the_last_progress_took():
    """A rise over 6 validations, then a flat line: significant stops 3 later, proportional 6 later."""
    rise = curve(0, 10, 20, 30, 40, 50, 60, *[60] * 8)
    assert replay("significant", rise)[1] == 9
    decisions, stopped = replay("proportional", rise)
    assert stopped == 12 and decisions[-1].kept == 12 and decisions[-1].patience == 6  # the latest of the 60s
    assert replay("proportional", curve(0, 20, 40, 40, 40, 40, 40))[1] == 5  # at least P = 3


def test_while_validations_tie_the_latest_is_kept_and_the_end_says_why():
    """MAP 0 at every validation: no rule keeps the first silently; each keeps the latest tied one, and
    the end-of-training line says that the rule never left warm-up."""
    zeros = curve(0, 0, 0, 0, 0, 0)
    ends = {}
    for rule in RULES:
        stopping = EarlyStopping("map", rule, 3)
        state = State()
        for step, validation_ in enumerate(zeros, 1):
            state, decision = stopping.decide(state, stats=validation_, step=50 * step)
            assert decision.kept == step - 1, rule
            if decision.stop:  # strict: fairseq's rule counts the zeros against patience
                break
        assert (state.kept, state.kept_step) == ((3, 200) if rule == "strict" else (5, 300)), rule
        ends[rule] = stopping.conclusion(state, "step")
    line = ends["proportional"]
    assert line.startswith("proportional on map: kept validation 6 (step 300, map 0)")
    assert "tied with validation 1" in line and "never left warm-up" in line and "no stop" in line
    assert ends["strict"].endswith("the latest of the best values; stopped after validation 4")


def test_the_end_of_training_line_names_the_kept_validation_and_the_stop():
    stopping = EarlyStopping("map", "significant", 2)
    state = State()
    for step, validation_ in enumerate(curve(0, 20, 40, 41, 42), 1):
        state, _ = stopping.decide(state, stats=validation_, step=step * 10)
    assert stopping.conclusion(state, "update") == \
        "significant on map: kept validation 3 (update 30, map 0.2), its last significant improvement; " \
        "stopped after validation 5"
    assert EarlyStopping().conclusion(State()) == "proportional on map: no validation seen, nothing kept"


def test_the_log_line_says_when_proportional_patience_has_grown():
    """After a rise that took 6 validations, proportional waits 6, not P = 3, and says so."""
    stopping = EarlyStopping("map", "proportional", 3)
    decisions, _ = stopping.replay([None] * 8, curve(0, 10, 20, 30, 40, 50, 60, (60, 1)))
    assert stopping.explain(decisions[-1]) == (f"proportional on map: validation 8 1 of 6 without improvement "
                                               f"(p = {decisions[-1].p_value:.4g}); patience grew to the 6 "
                                               f"validations the last improvement took")
    early = EarlyStopping("map", "proportional", 3).replay([None] * 4, curve(0, 20, 40, (40, 1)))[0][-1]
    assert "grew" not in stopping.explain(early)


def test_declined_stops_after_p_validations_significantly_worse_than_the_best():
    decline = curve(0, 40, 60, 40, 58, 40, 38, 36)
    decisions, stopped = replay("declined", decline, patience=2)
    assert [d.runs for d in decisions[3:]] == [1, 0, 1, 2]  # 58 is not significantly worse: the count restarts
    assert stopped == 6 and decisions[-1].kept == 2


def fairseq_replay(values, patience, maximize):
    """fairseq's own should_stop_early, and checkpoint_best.pt's >= rule."""
    pytest.importorskip("fairseq")
    from fairseq_cli.train import should_stop_early
    for attr in ("best", "num_runs"):
        if hasattr(should_stop_early, attr):
            delattr(should_stop_early, attr)
    cfg = SimpleNamespace(checkpoint=SimpleNamespace(patience=patience, maximize_best_checkpoint_metric=maximize))
    best = None
    for i, value in enumerate(values):
        if best is None or (value >= values[best] if maximize else value <= values[best]):
            best = i
        if should_stop_early(cfg, value):
            return best, i
    return best, None


@settings(deadline=None)
@given(values=st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.4, 0.5]), min_size=1, max_size=12),
       patience=st.integers(1, 4), maximize=st.booleans())
def test_strict_is_fairseqs_rule(values, patience, maximize):
    decisions, stopped = EarlyStopping("loss", "strict", patience, maximize).replay(values)
    assert (decisions[-1].kept, stopped) == fairseq_replay(values, patience, maximize)


def test_the_state_is_json_and_decides_on_alike():
    rule = EarlyStopping("map", patience=3)
    state = State()
    for validation_ in PLATEAU[:5]:
        state, _ = rule.decide(state, stats=validation_, step=10)
    restored = State.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored == state and len(restored.reference_rows[0]) == 5  # n_prompts, n_rel, n_empty, n_hyps, map
    assert rule.decide(restored, stats=PLATEAU[5]) == rule.decide(state, stats=PLATEAU[5])


@pytest.mark.parametrize("data", [None, [], {"seen": 1}, {**State().to_dict(), "seen": -1},
                                  {**State().to_dict(), "runs": True}, {**State().to_dict(), "kept_value": "x"},
                                  {**State().to_dict(), "reference_rows": [[1.0], [1.0, 2.0]]},
                                  {**State().to_dict(), "reference_rows": [[float("nan")]]}])
def test_anything_else_is_no_state(data):
    with pytest.raises(InputError, match="early-stopping state"):
        State.from_dict(data)


def test_misuse_is_an_error_naming_it():
    rule = EarlyStopping("map", patience=1, warmup=0)
    with pytest.raises(InputError, match="tests per-prompt statistics"):
        rule.decide(State(), 0.5)
    state, _ = rule.decide(State(), stats=validation(10))
    state, decision = rule.decide(state, stats=validation(10))
    assert decision.stop
    # resumed after the stop (a requeued job): it stops again at once, keeping what it kept
    again, decision = rule.decide(state, stats=validation(50))
    # 1: the latest of the two tied 10s
    assert decision.stop and decision.kept == 1 and again.seen == 3 and again.kept_value == state.kept_value
    other = PerPrompt.from_matrix(SCORER, [f"q{i}" for i in range(N)], validation(10).matrix)
    with pytest.raises(InputError, match="prompts are not the earlier"):
        EarlyStopping("map").decide(rule.decide(State(), stats=validation(10))[0], stats=other)
    with pytest.raises(InputError, match="not among"):
        EarlyStopping("wf1").decide(State(), stats=validation(10))


@pytest.mark.parametrize("options, message", [
    (dict(rule="often"), "unknown stopping rule"), (dict(patience=0), "patience must be"),
    (dict(alpha=0.0), "alpha must be"), (dict(alpha=1.0), "alpha must be"), (dict(warmup=-1), "warm-up must be"),
    (dict(warmup="soon"), "warm-up must be"), (dict(n_samples=0), "n_samples must be")])
def test_settings_are_checked(options, message):
    with pytest.raises(InputError, match=message):
        EarlyStopping("map", **options)


@pytest.mark.parametrize("rule", ["strict", "significant", "proportional", "declined"])
def test_fairseq_carries_out_every_decision(rule):
    """The fairseq task sets fairseq's own state after each decision: fairseq's should_stop_early must
    then stop exactly when the rule stops (proportional waits past --patience), and save_checkpoint's
    checkpoint_best.pt condition must hold exactly when the rule keeps the validation."""
    pytest.importorskip("fairseq")
    from fairseq import checkpoint_utils
    from fairseq_cli.train import should_stop_early

    from nbest_eval.fairseq.early_stopping import carry_out

    validations = curve(0, 10, 20, 30, 40, 50, 60, 61, 60, *[60] * 6)
    stopping = EarlyStopping("map", rule, 3, warmup=0)
    cfg = SimpleNamespace(checkpoint=SimpleNamespace(patience=3, maximize_best_checkpoint_metric=True))
    save = checkpoint_utils.save_checkpoint
    for fn, attr in ((should_stop_early, "best"), (should_stop_early, "num_runs"), (save, "best")):
        if hasattr(fn, attr):
            delattr(fn, attr)
    state, stops = State(), []
    for validation_ in validations:
        state, decision = stopping.decide(state, stats=validation_)
        value = validation_.scores()["map"]
        carry_out(decision, value, state.kept_value, True, 3)
        stops.append(should_stop_early(cfg, value))
        # save_checkpoint's own lines: best = max(value, best); checkpoint_best.pt if value >= best
        save.best = max(value, getattr(save, "best", value))
        assert (value >= save.best) == (decision.kept == decision.index), (rule, decision)
        assert stops[-1] == decision.stop, (rule, decision)
        if decision.stop:
            break
    assert stops[-1] == (rule != "declined") and (rule != "proportional" or len(stops) == 13)  # 6 runs after 6


def test_a_first_undefined_value_does_not_freeze_the_rule():
    """A measure undefined at the first validation (a preference correlation with no prompt counted):
    its first defined value is progress, and the rule goes on from there."""
    scorer, ids = Scorer(["pref_spearman"]), [f"p{i}" for i in range(N)]
    undefined = PerPrompt.from_matrix(scorer, ids, np.zeros((N, len(scorer.stat_names))))
    matrix = np.zeros((N, len(scorer.stat_names)))
    for name, value in (("n_prompts", 1), ("pref_spearman", 0.9), ("pref_spearman:n", 1)):
        matrix[:, scorer.stat_names.index(name)] = value
    defined = PerPrompt.from_matrix(scorer, ids, matrix)
    assert undefined.scores()["pref_spearman"] is None and defined.scores()["pref_spearman"] == pytest.approx(0.9)
    for rule in RULES:
        stopping = EarlyStopping("pref_spearman", rule, 2, warmup="significant")
        decisions, _ = stopping.replay([None] * 3, [undefined, defined, defined])
        assert decisions[1].improved and not decisions[1].warming_up and decisions[1].kept == 1, rule
