"""Scoring beside generation (nbest_eval.processes.pipeline): the helper process's sums are bit for bit those
of a sequential loop, its errors surface where the total is taken, and it ends cleanly. The
adapters' use of it is tested with real models in test_fairseq_plugin.py and test_hf_callback.py."""

import logging
import os
import random
import re
import signal
import time

import pytest

from nbest_eval import Hyp, PromptMean, Scorer
from nbest_eval.analysis.synth import generate
from nbest_eval.metrics import registry
from nbest_eval.processes import pipeline
from nbest_eval.processes.pipeline import InlineScoring, RemoteTraceback, ScoringProcess, start_scoring

#: F1 metrics hold local functions (the scorer does not pickle): the helper builds its own from the options.
#: (No preference metric: its first use imports scipy, half a second in each process.)
METRICS = ["map", "rr", "ndcg10", "ap_t", "wf1", "bleu_1x1", "bleu_100x100"]
OPTIONS = {"wf1_top": 5}


@pytest.fixture(scope="module")
def synth_gold():
    """The gold of a 12-prompt synthetic corpus."""
    return generate(seed=3, train_pairs=0, valid_prompts=12).gold


@pytest.fixture(scope="module")
def lists(synth_gold):
    """Every prompt's 8-best list: valid translations, near misses and junk, with scores."""
    rng = random.Random(7)

    def hyp(prompt):
        text = rng.choice(prompt.translations)[0]
        text = rng.choice([text, text.upper() + " !", " ".join(text.split()[::-1]), "zz top"])
        return Hyp(text, -rng.random() * 5)

    return [(prompt, sorted((hyp(prompt) for _ in range(8)), key=lambda h: -h.score)) for prompt in synth_gold]


@pytest.fixture(scope="module")
def helper(synth_gold):
    scoring = start_scoring(Scorer(METRICS, **OPTIONS), list(synth_gold))
    assert isinstance(scoring, ScoringProcess)
    yield scoring
    scoring.close()


def sequential(scorer, lists):
    total = scorer.zero()
    for prompt, hyps in lists:
        total = total + scorer.prompt_stats(prompt, hyps)
    return total


def test_helper_sums_equal_a_sequential_loop(helper, synth_gold, lists):
    scorer = Scorer(METRICS, **OPTIONS)
    expected = sequential(scorer, lists)
    assert expected == scorer.score(synth_gold, {p.id: h for p, h in lists}).stats
    for chunks in ([lists], [lists[i:i + 5] for i in range(0, len(lists), 5)], [[item] for item in lists]):
        tally = helper.tally()
        for chunk in chunks:
            tally.add(chunk)
        stats, seconds, per_prompt = tally.total()
        assert stats == expected  # exact: the same additions in the same order
        assert seconds > 0
        # each prompt's statistics, in the order added (what early stopping resamples)
        assert per_prompt == [(prompt.id, scorer.prompt_stats(prompt, hyps)) for prompt, hyps in lists]
    assert helper.tally().total() == (scorer.zero(), 0.0, [])  # nothing added


def test_an_abandoned_tally_is_forgotten(helper, lists):
    scorer = Scorer(METRICS, **OPTIONS)
    helper.tally().add(lists[:3])  # an evaluation that failed before its total
    tally = helper.tally()
    tally.add(lists[3:5])
    assert tally.total()[0] == sequential(scorer, lists[3:5])


def test_an_error_in_the_helper_surfaces_at_the_total(helper, lists):
    prompt, hyps = lists[0]
    tally = helper.tally()
    tally.add([(prompt, hyps), (prompt, [Hyp(None, 0.0)])])  # not a text: scoring fails
    tally.add(lists[1:3])
    with pytest.raises(AttributeError) as raised:
        tally.total()
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "prompt_stats" in str(raised.value.__cause__)  # the helper's traceback
    again = helper.tally()  # the helper goes on
    again.add(lists[:2])
    assert again.total()[0] == sequential(Scorer(METRICS, **OPTIONS), lists[:2])


def crash(scoring):
    scoring._send(("a request", "it cannot read"))  # with no lists: a traceback in the helper's loop


def stop(scoring):
    os.kill(scoring.process.pid, signal.SIGSTOP)


#: (case, what happens to the helper mid-validation, what the total says)
FAULTS = [
    ("killed", lambda scoring: scoring.process.kill(), r"was killed by signal 9 \(SIGKILL\) \(it wrote nothing"),
    ("terminated", lambda scoring: scoring.process.terminate(), r"was killed by signal 15 \(SIGTERM\)"),
    ("dies with a traceback", crash,
     r"stopped \(exit code 1\); its last words:\nTraceback(.|\n)*IndexError: list index out of range"),
    ("stopped (SIGSTOP)", stop, r"no sign of progress for 2 s \(nbest_eval.processes.pipeline.STALL_SECONDS\) "
                                r"and is stopped "
                                r"\(SIGSTOP\): it was ended"),
]


@pytest.mark.parametrize("case, fault, message", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_helper_that_fails_mid_validation_is_reported(synth_gold, lists, monkeypatch, case, fault, message):
    """The total says what became of the helper, and no add waits for it: lists far beyond what the
    pipe to a stopped helper holds are queued at once."""
    monkeypatch.setattr(pipeline, "STALL_SECONDS", 2.0)
    scoring = ScoringProcess(Scorer(["map"]), list(synth_gold))
    tally = scoring.tally()
    tally.add(lists[:3])
    fault(scoring)
    start = time.monotonic()
    for _ in range(2000):  # about 5 MB of requests
        tally.add(lists)
    assert time.monotonic() - start < 10
    with pytest.raises(RuntimeError, match=message):
        tally.total()
    assert scoring.process.poll() is not None and not scoring.alive  # ended, not left stopped
    with pytest.raises(RuntimeError, match=message if case != "stopped (SIGSTOP)" else "killed by signal 9"):
        scoring.tally().total()  # and a later total says so at once
    scoring.close()


def test_a_busy_helper_is_not_taken_for_a_stalled_one(synth_gold, lists, monkeypatch):
    """A total that takes two stall timeouts to score: the helper's signs of progress keep it going.
    The timeout is short for the test's sake, but not so short that a moment of CPU starvation on a
    loaded 2-core machine (CI runs training beside it) passes for a stall: 1.5 s did, once."""
    monkeypatch.setattr(pipeline, "STALL_SECONDS", 3.0)
    scoring = ScoringProcess(Scorer(METRICS, **OPTIONS), list(synth_gold))
    scoring.tally().total()  # set up and warmed up
    elapsed, repeats = 0.0, 1000
    while elapsed < 2 * pipeline.STALL_SECONDS:  # more work until it outlasts two stall timeouts
        tally, many = scoring.tally(), lists * repeats
        start = time.monotonic()
        tally.add(many)
        assert len(tally.total().per_prompt) == len(many)
        elapsed, repeats = time.monotonic() - start, repeats * 2
    scoring.close()


def test_a_helper_that_cannot_start_says_why(synth_gold, lists, monkeypatch):
    """A metric registered in this process only (not on import of nbest_eval): the helper cannot build it."""
    mine = registry.MetricSpec("mine", re.compile("mine"), "", lambda match, options: PromptMean("mine", len))
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY + [mine])
    scoring = ScoringProcess(Scorer(["mine"]), list(synth_gold))
    tally = scoring.tally()
    tally.add(lists[:1])
    with pytest.raises(RuntimeError, match="could not start") as raised:
        tally.total()
    assert "unknown metric 'mine'" in str(raised.value.__cause__)
    scoring.close()


def test_a_metric_registered_outside_nbest_eval_is_scored_inline(synth_gold, lists, monkeypatch, caplog):
    """start_scoring does not hand the helper a metric it cannot build: the lists are scored on the
    calling thread, with a warning that names the metric, not an error at the first total."""
    mine = registry.MetricSpec("mine", re.compile("mine"), "",
                               lambda match, options: PromptMean("mine", lambda judged: 0.5))
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY + [mine])
    with caplog.at_level(logging.WARNING):
        scoring = start_scoring(Scorer(["map", "mine"]), list(synth_gold))
    assert isinstance(scoring, InlineScoring) and "'mine' is registered outside nbest_eval" in caplog.text
    tally = scoring.tally()
    tally.add(lists)
    assert tally.total().stats == sequential(Scorer(["map", "mine"]), lists)
    assert isinstance(start_scoring(Scorer(["map"]), list(synth_gold)), ScoringProcess)  # the package's own


def test_close_ends_the_helper(synth_gold):
    scoring = ScoringProcess(Scorer(["map"]), list(synth_gold))
    scoring.close()
    assert scoring.process.wait(timeout=5) is not None and not scoring.alive
    scoring.close()  # twice is fine


def test_without_a_helper_lists_are_scored_inline(synth_gold, lists, caplog, monkeypatch):
    def no_process(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr(pipeline.subprocess, "Popen", no_process)
    scorer = Scorer(METRICS, **OPTIONS)
    with caplog.at_level(logging.WARNING):
        scoring = start_scoring(scorer, list(synth_gold))
    assert isinstance(scoring, InlineScoring) and "calling thread" in caplog.text and "no processes here" in caplog.text
    tally = scoring.tally()
    tally.add(lists[:5])
    tally.add(lists[5:])
    total = tally.total()
    assert total.stats == sequential(Scorer(METRICS, **OPTIONS), lists)
    assert [pid for pid, _ in total.per_prompt] == [prompt.id for prompt, _ in lists]
    failing = scoring.tally()
    failing.add([(lists[0][0], [Hyp(None, 0.0)])])
    with pytest.raises(AttributeError):
        failing.total()


def test_the_helper_builds_its_scorer_from_the_options(synth_gold, lists):
    scorer = Scorer(["map", "bleu_1x1"], bleu_lowercase=True)
    scoring = start_scoring(scorer, list(synth_gold))
    assert isinstance(scoring, ScoringProcess)
    tally = scoring.tally()
    tally.add(lists)
    assert tally.total()[0] == sequential(Scorer(["map", "bleu_1x1"], bleu_lowercase=True), lists)
    scoring.close()
