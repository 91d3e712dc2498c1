"""Both adapters' early stopping on resume, without training: the saved stopping states that training
resumes from, and alphas the paired bootstrap cannot reach (refused in all three places).

Every saved decision state goes through one loader (``EarlyStopping.restore``; fairseq's own patience
entry through the task's check): the fairseq task's entry in a checkpoint, fairseq's ``best`` and
``num_runs`` that the task saves when fairseq decides alone, and the HF callback's entry in
``trainer_state.json``. A state that fails is dropped with ONE warning naming what was wrong, and
training goes on from a fresh state: never a TypeError, IndexError, ValueError, OverflowError,
AttributeError or KeyError. Each class is a table.
"""

import json
import logging
import math
from types import SimpleNamespace

import numpy as np
import pytest

from nbest_eval.cli import main
from nbest_eval.data import Gold, GoldPrompt, InputError
from nbest_eval.formats import write_gold
from nbest_eval.metrics import PARAMS
from nbest_eval.scorer import Scorer
from nbest_eval.significance import PerPrompt
from nbest_eval.training.early_stopping import EarlyStopping, State

N, STEP = 20, 30
IDS = [f"p{i}" for i in range(N)]
SCORER = Scorer(["map", "bleu_1x1"])
GOLD = Gold([GoldPrompt(i, f"prompt {i}", (("a", 0.5), ("b", 0.5))) for i in IDS])


def validation(right):
    """20 prompts, the first ``right`` of them right: MAP right / 20."""
    matrix = np.zeros((N, len(SCORER.stat_names)))
    matrix[:, SCORER.stat_names.index("n_prompts")] = 1
    matrix[:, SCORER.stat_names.index("n_rel")] = 1
    matrix[:right, SCORER.stat_names.index("map")] = 1
    return PerPrompt.from_matrix(SCORER, IDS, matrix)


def decided(key="map"):
    """significant on ``key``: validations at steps 10, 20, 30 (MAP 0, 0.5, 0.5): kept step 20, one run."""
    stopping, state = EarlyStopping(key, "significant", 3), State()
    for step, right in ((10, 0), (20, 10), (30, 10)):
        state, _ = stopping.decide(state, stats=validation(right), step=step, gold=GOLD.digest())
    return json.loads(json.dumps(state.to_dict()))


SAVED = decided()
HUGE = 10 ** 400


def warnings_of(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= logging.WARNING]


# -- fairseq: the task's entry in the checkpoint it resumes from ------------------------------------------

def checkpoint(stopping=None, patience=None, **top):
    """A checkpoint as the task saves it at update STEP: its entry holds ``stopping`` (the rule's) or
    ``patience`` (fairseq's own count); ``top`` replaces top-level fields."""
    entry = {}
    if stopping is not None:
        entry["stopping"] = stopping
    if patience is not None:
        entry["patience"] = patience
    return {"task_state": {"nbest_eval": entry}, "optimizer_history": [{"num_updates": STEP}], **top}


def rule_entry(**state):
    return {"metric": "map", "rule": "significant on map", "state": {**SAVED, **state}}


def patience_entry(**fields):
    return {key: value for key, value in {"best": 0.5, "num_runs": 1, "metric": "loss", **fields}.items()
            if value is not KeyError}


FAIRSEQ_RULE_REFUSED = {  # checkpoint -> what the warning says (the rule decides, on map)
    "task_state a string": (checkpoint(task_state="abc"), "its task_state entry is a str, not a dict"),
    "its entry a list": (checkpoint(task_state={"nbest_eval": [1]}), "its nbest_eval entry is a list, not a dict"),
    "the rule's entry a string": (checkpoint(stopping="abc"), "its stopping entry is a str, not a dict"),
    "no entry": (checkpoint(patience=patience_entry()), "it has no stopping state"),
    "another metric": (checkpoint({**rule_entry(), "metric": "bleu_1x1"}),
                       "its state is for --best-checkpoint-metric 'bleu_1x1', not map"),
    "no state in the entry": (checkpoint({"metric": "map"}), "not an early-stopping state: a NoneType, not a dict"),
    "a missing key": (checkpoint({**rule_entry(), "state": {k: v for k, v in SAVED.items() if k != "kept"}}),
                      "not an early-stopping state: no kept"),
    "a flag out of place": (checkpoint(rule_entry(stopped="no")), "stopped 'no'"),
    "rows of the wrong shape": (checkpoint(rule_entry(reference_rows=[[0.0] * 4] * N)), "reference_rows are 20 x 4"),
    "a 400-digit integer": (checkpoint(rule_entry(kept_step=HUGE)), "kept_step 1000000000"),
    "an edited best": (checkpoint(rule_entry(reference_value=0.99, kept_value=0.99)),
                       "reference_value 0.99 is not its statistics' map, 0.5"),
    "runs -100": (checkpoint(rule_entry(runs=-100)), "runs -100"),
    "kept at a negative update": (checkpoint(rule_entry(kept_step=-7)),
                                  "kept_step -7 is not a step from 0 to 9223372036854775807"),
    "another measure's statistics": (checkpoint(rule_entry(measure="bleu_100x100")), "of bleu_100x100, not map"),
    "no update count": (checkpoint(rule_entry(), optimizer_history=[]), "it records no update count"),
    "another gold, the same ids": (checkpoint(rule_entry(gold="0" * 64)), "its statistics are of another gold"),
    "another rule": (checkpoint({**rule_entry(), "rule": "proportional on map, patience 3, warm-up significant"}),
                     "its state is for the 'proportional' rule, not 'significant' (--nbest-stopping)"),
}

FAIRSEQ_PATIENCE_REFUSED = {  # checkpoint -> what the warning says (fairseq decides alone, on loss)
    "the entry a string": (checkpoint(patience="abc"), "its patience entry is a str, not a dict"),
    "no entry": (checkpoint(rule_entry()), "it has no patience state"),
    "num_runs 'abc'": (checkpoint(patience=patience_entry(num_runs="abc")),
                       "its num_runs 'abc' is not a count from 0 to the 30 update(s)"),
    "no num_runs": (checkpoint(patience=patience_entry(num_runs=KeyError)), "its patience state has no num_runs"),
    "no best": (checkpoint(patience=patience_entry(best=KeyError)), "its patience state has no best"),
    "num_runs -100": (checkpoint(patience=patience_entry(num_runs=-100)), "its num_runs -100 is not a count"),
    "num_runs beyond the updates": (checkpoint(patience=patience_entry(num_runs=31)), "its num_runs 31 is not"),
    "a 400-digit num_runs": (checkpoint(patience=patience_entry(num_runs=HUGE)),
                             "its num_runs 1" + "0" * 39 + "... (401 characters)"),
    "best 'abc'": (checkpoint(patience=patience_entry(best="abc")), "its best 'abc' is not a finite number"),
    "a NaN best": (checkpoint(patience=patience_entry(best=float("nan"))), "its best nan is not a finite number"),
    "a 400-digit best": (checkpoint(patience=patience_entry(best=HUGE)),
                         "its best 1" + "0" * 39 + "... (401 characters)"),
    "a flag for best": (checkpoint(patience=patience_entry(best=True)), "its best True is not a finite number"),
    "another metric": (checkpoint(patience=patience_entry(metric="map")), "its state is for --best-checkpoint-metric "
                                                                          "'map', not loss"),
}


@pytest.fixture
def fairseq_resume(tmp_path, monkeypatch):
    """restore() as the task calls it when fairseq has resumed from tmp_path/checkpoint_last.pt;
    returns (run it on a checkpoint dict and a metric, fairseq's should_stop_early)."""
    pytest.importorskip("fairseq")
    import torch
    from fairseq import checkpoint_utils
    from fairseq_cli.train import should_stop_early

    from nbest_eval.fairseq.early_stopping import restore

    monkeypatch.setattr(checkpoint_utils.save_checkpoint, "best", 0.5, raising=False)  # fairseq resumed
    for attr in ("best", "num_runs"):
        monkeypatch.delattr(should_stop_early, attr, raising=False)
    options = {f"nbest_{name}": param.default for name, param in PARAMS.items()}

    def resume(saved, metric):
        torch.save(saved, tmp_path / "checkpoint_last.pt")
        cfg = SimpleNamespace(save_dir=str(tmp_path), restore_file="checkpoint_last.pt", checkpoint_suffix="",
                              continue_once=None, best_checkpoint_metric=metric, **options)
        stopping = EarlyStopping("map", "significant", 3) if metric == "map" else None
        return restore(cfg, stopping, IDS, GOLD.digest())

    return resume, should_stop_early


@pytest.mark.parametrize("metric, saved, message", [
    *(("map", *case) for case in FAIRSEQ_RULE_REFUSED.values()),
    *(("loss", *case) for case in FAIRSEQ_PATIENCE_REFUSED.values())],
    ids=[f"rule: {k}" for k in FAIRSEQ_RULE_REFUSED] + [f"fairseq's patience: {k}" for k in FAIRSEQ_PATIENCE_REFUSED])
def test_fairseq_drops_a_damaged_state_with_one_warning(fairseq_resume, caplog, metric, saved, message):
    resume, should_stop_early = fairseq_resume
    with caplog.at_level(logging.INFO):
        assert resume(saved, metric) is None
    warned = warnings_of(caplog, "nbest_eval.fairseq.early_stopping")
    assert len(warned) == 1 and message in warned[0], warned
    assert warned[0].startswith("translation_nbest: early-stopping state not restored from ")
    assert warned[0].endswith("; patience counts from 0")
    assert not hasattr(should_stop_early, "best") and not hasattr(should_stop_early, "num_runs")


def test_fairseq_restores_an_undamaged_state(fairseq_resume, caplog):
    """The controls of the tables: the rule's state, and fairseq's own count."""
    resume, should_stop_early = fairseq_resume
    with caplog.at_level(logging.INFO):
        assert resume(checkpoint(rule_entry()), "map") == State.from_dict(SAVED)
        assert resume(checkpoint(patience=patience_entry()), "loss") is None
    assert (should_stop_early.best, should_stop_early.num_runs) == (0.5, 1)
    assert not warnings_of(caplog, "nbest_eval.fairseq.early_stopping")


def test_fairseq_restores_a_state_kept_beyond_a_restarted_update_count(fairseq_resume, caplog):
    """A resume that does not restore the optimizer state (--no-save-optimizer-state, as the tutorial
    trains) counts updates from 0 again: the kept update may lie beyond the checkpoint's count, and
    the state is still the run's (dropping it would let a worse model take checkpoint_best.pt)."""
    resume, _ = fairseq_resume
    with caplog.at_level(logging.INFO):
        restored = resume(checkpoint(rule_entry(kept_step=STEP + 40)), "map")
    assert restored == State.from_dict({**SAVED, "kept_step": STEP + 40})
    assert not warnings_of(caplog, "nbest_eval.fairseq.early_stopping")
    assert f"keeping validation {restored.kept + 1}, " in caplog.text  # counted from 1, as the end line counts


# -- HF: the callback's entry in trainer_state.json ---------------------------------------------------------------

def trainer_state(entry):
    from transformers import TrainerState

    return TrainerState(global_step=STEP, stateful_callbacks={"NBestEarlyStoppingCallback": entry})


def hf_entry(metric="map", name=None, **state):
    return {"args": {"metric": metric, "patience": 3, "rule": "significant", "alpha": 0.05, "warmup": None,
                     "name": name, "stopping_state": {**SAVED, **state}}, "attributes": {}}


OLD = {k: v for k, v in SAVED.items() if k not in ("measure", "statistics", "gold")}  # saved before they were recorded

HF_REFUSED = {  # the callback's entry in trainer_state.json -> what the warning says
    "a string": ("abc", "an entry of NBestEarlyStoppingCallback is 'abc', not {'args': {...}}"),
    "a list of junk": ([1, None], "an entry of NBestEarlyStoppingCallback is None"),
    "args a list": ({"args": []}, "is {'args': []}, not"),
    "a state that is a string": ({"args": {**hf_entry()["args"], "stopping_state": "abc"}}, "a str, not a dict"),
    "a missing key": ({"args": {**hf_entry()["args"], "stopping_state": {k: v for k, v in SAVED.items()
                                                                          if k != "runs"}}}, "no runs"),
    "a flag out of place": (hf_entry(warming_up=1), "warming_up 1"),
    "rows of the wrong shape": (hf_entry(reference_rows=[[0.0] * 5] * (N - 1)), "reference_rows are 19 x 5"),
    "a 400-digit integer": (hf_entry(seen=HUGE), "seen 1000000000"),
    "an edited best": (hf_entry(reference_value=0.99, kept_value=0.99), "reference_value 0.99 is not"),
    "a NaN best": (hf_entry(reference_value=float("nan")), "reference_value nan"),
    "runs -100": (hf_entry(runs=-100), "runs -100"),
    "kept_step 999": (hf_entry(kept_step=999), "kept_step 999 is not a step from 0 to the current 30"),
    "kept_step -7": (hf_entry(kept_step=-7), "kept_step -7 is not a step"),
    "a bleu_100x100 state on bleu_1x1": (hf_entry(metric="bleu_100x100"), "a state for 'bleu_100x100', not map"),
    "another measure's statistics": (hf_entry(measure="bleu_100x100|tok:13a|case:mixed|smooth:exp"),
                                     "its statistics are of bleu_100x100"),
    "an old state of another layout": ({"args": {**hf_entry()["args"], "stopping_state": {
        **OLD, "reference_rows": [[0.0] * 14] * N}}}, "reference_rows are 20 x 14, not 20 prompts x 5"),
    "other prompts": (hf_entry(prompts="0" * 64), "of other prompts"),
    "another gold, the same ids": (hf_entry(gold="0" * 64), "its statistics are of another gold"),
    "another rule": ({"args": {**hf_entry()["args"], "rule": "proportional"}},
                     "it is a state for the 'proportional' rule, not 'significant'"),
}


@pytest.fixture
def hf_callback(monkeypatch):
    """An NBestEarlyStoppingCallback on map whose n-best callback scores IDS with SCORER, as on_train_begin
    finds it in the Trainer."""
    pytest.importorskip("transformers")
    hf = pytest.importorskip("nbest_eval.hf")

    def make(**options):
        callback = hf.NBestEarlyStoppingCallback("map", rule="significant", **options)
        evaluator = SimpleNamespace(scorer=SCORER, prompts=GOLD.prompts, gold=GOLD)
        monkeypatch.setattr(callback, "_nbest_callback", lambda: SimpleNamespace(evaluator=evaluator))
        return callback

    return make


@pytest.mark.parametrize("entry, message", HF_REFUSED.values(), ids=HF_REFUSED.keys())
def test_hf_drops_a_damaged_state_with_one_warning(hf_callback, caplog, entry, message):
    with caplog.at_level(logging.INFO):
        assert hf_callback()._resumed(trainer_state(entry)) == State()
    warned = warnings_of(caplog, "nbest_eval.hf.early_stopping")
    assert len(warned) == 1 and message in warned[0], warned
    assert warned[0].startswith("n-best early stopping: the state saved at step 30 is not used (")


def test_hf_restores_an_undamaged_state_and_fills_an_old_one(hf_callback, caplog):
    """The controls: the entry as saved, a state saved before the measure was recorded (it gets this
    run's), the state the callback was made with (transformers' rebuild), and no entry at all."""
    with caplog.at_level(logging.INFO):
        assert hf_callback()._resumed(trainer_state(hf_entry())) == State.from_dict(SAVED)
        old = {"args": {**hf_entry()["args"], "stopping_state": OLD}}
        assert hf_callback()._resumed(trainer_state(old)) == State.from_dict(SAVED)
        assert hf_callback(stopping_state=SAVED)._resumed(trainer_state(hf_entry(name="other"))) == \
            State.from_dict(SAVED)
        assert hf_callback()._resumed(trainer_state(hf_entry(name="other"))) == State()
    assert not warnings_of(caplog, "nbest_eval.hf.early_stopping")


def test_hf_kept_step_must_be_a_step_the_trainer_evaluated_at(hf_callback, caplog):
    """Evaluations at steps 10, 20, 30 (SAVED keeps step 20): kept_step 25 lies within the bounds but
    is no evaluation's, and the Trainer's best checkpoint would be another's; 20 is kept."""
    history = [{"loss": 1.0, "step": 5}] + [{"eval_map": 0.5, "step": s} for s in (10, 20, 30)]
    moved = trainer_state(hf_entry(kept_step=25))
    moved.log_history = history
    with caplog.at_level(logging.INFO):
        assert hf_callback()._resumed(moved) == State()
    warned = warnings_of(caplog, "nbest_eval.hf.early_stopping")
    assert len(warned) == 1 and "kept_step 25 is not a step the Trainer evaluated at" in warned[0], warned
    caplog.clear()
    kept = trainer_state(hf_entry())
    kept.log_history = history
    assert hf_callback()._resumed(kept) == State.from_dict(SAVED)
    assert not warnings_of(caplog, "nbest_eval.hf.early_stopping")


@pytest.mark.parametrize("stopping_state", ["abc", {**SAVED, "seen": HUGE}, {"seen": 1}])
def test_hf_callback_made_with_a_damaged_state_is_made(hf_callback, caplog, stopping_state):
    """transformers rebuilds the callback from its saved args (restore_callback_states_from_checkpoint):
    a damaged state there no longer raises while the Trainer loads; it is checked on resume."""
    callback = hf_callback(stopping_state=stopping_state)
    assert callback.stopping_state == State()
    with caplog.at_level(logging.INFO):
        assert callback._resumed(trainer_state([])) == State()
    assert len(warnings_of(caplog, "nbest_eval.hf.early_stopping")) == 1


# -- alpha: refused in all three places that make a rule ---------------------------------------------------------

def fairseq_rule(alpha):
    pytest.importorskip("fairseq")
    from nbest_eval.fairseq.early_stopping import rule_from_config

    cfg = SimpleNamespace(best_checkpoint_metric="map", nbest_stopping="significant", patience=3,
                          maximize_best_checkpoint_metric=True, nbest_stopping_alpha=alpha, nbest_stopping_warmup=None)
    return rule_from_config(cfg, ["map"])


def hf_rule(alpha):
    pytest.importorskip("transformers")
    return pytest.importorskip("nbest_eval.hf").NBestEarlyStoppingCallback("map", alpha=alpha)


def select_rule(alpha, tmp_path, capsys):
    gold = tmp_path / "gold.txt"
    write_gold(Gold([GoldPrompt("p1", "hi", (("olá", 1.0),))]), gold)
    code = main(["select", str(tmp_path), "--from-nbest", "--gold", str(gold), "--patience", "3",
                 "--alpha", str(alpha)])
    if code:
        raise InputError(capsys.readouterr().err)


PLACES = {"fairseq --nbest-stopping-alpha": lambda alpha, *_: fairseq_rule(alpha),
          "HF callback's alpha": lambda alpha, *_: hf_rule(alpha),
          "select --stopping --alpha": select_rule}


@pytest.mark.parametrize("place", PLACES, ids=PLACES.keys())
@pytest.mark.parametrize("alpha", [0.0001, 0.000999])
def test_an_alpha_the_resamples_cannot_reach_is_refused_in_all_three_places(place, alpha, tmp_path, capsys):
    """1,000 resamples: no p-value is below 1 / 1001 = 0.000999001 (the issue's --nbest-stopping-alpha 0.0001)."""
    assert 1 / 1001 > alpha and math.isclose(1 / 1001, 0.000999001, rel_tol=1e-6)
    with pytest.raises(InputError, match=rf"alpha {alpha} is out of reach: with 1000 paired-bootstrap resamples the "
                                         rf"smallest p-value is 1 / \(1000 \+ 1\) = 0.000999"):
        PLACES[place](alpha, tmp_path, capsys)
