"""The paired tests (paired bootstrap, approximate randomization, paired t) against sacrebleu's
``PairedTest`` and scipy's ``ttest_rel``, hand-made cases, and what the API refuses (never against
this code's own output)."""

import re

import pytest
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.significance import PairedTest
from scipy import stats as scipy_stats
from significance_cases import average_precisions, per_prompt, sacrebleu_inputs, systems

from nbest_eval import InputError, Scorer
from nbest_eval.signature import resampling
from nbest_eval.significance import DEFAULT_SAMPLES, TESTS, PerPrompt, check_mean, get_test, paired_help, paired_test


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_bleu_1x1_paired_p_values_equal_sacrebleu(test):
    gold, lists = systems()
    scorer = Scorer(["bleu_1x1", "map"])
    ours = paired_test(per_prompt(scorer, gold, lists[0], "base"),
                       [per_prompt(scorer, gold, nbest, f"s{i}") for i, nbest in enumerate(lists[1:])], test)
    named = [(f"s{i - 1}" if i else "base", sacrebleu_inputs(gold, nbest)[0]) for i, nbest in enumerate(lists)]
    _, results = PairedTest(named, {"BLEU": BLEU()}, sacrebleu_inputs(gold, lists[0])[1], test_type=test)()
    for i, name in enumerate(["s0", "s1"], 1):
        expected = results["BLEU"][i]
        assert ours[name]["bleu_1x1"].p_value == expected.p_value
        assert ours[name]["bleu_1x1"].score == pytest.approx(expected.score, abs=1e-9)
        if test == "bs":
            assert ours[name]["bleu_1x1"].interval.mean == pytest.approx(expected.mean, abs=1e-5)
            assert ours[name]["bleu_1x1"].interval.half_width == pytest.approx(expected.ci, abs=1e-5)
    assert len({r["bleu_1x1"].p_value for r in ours.values()}) == 2  # the systems do differ


def test_paired_t_on_average_precision_equals_scipy_ttest_rel():
    gold, lists = systems()
    scorer = Scorer(["map", "bleu_100x100"])
    result = paired_test(per_prompt(scorer, gold, lists[0], "base"), [per_prompt(scorer, gold, lists[1], "s")], "t")
    expected = scipy_stats.ttest_rel(average_precisions(gold, lists[1]), average_precisions(gold, lists[0]))
    assert result["s"]["map"].p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert result["s"]["bleu_100x100"].p_value is None  # BLEU is no mean of per-prompt values


def test_systems_over_different_prompts_cannot_be_paired():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "base")
    rows = scorer.score(gold, lists[1], keep_per_prompt=True).per_prompt
    with pytest.raises(InputError, match=r"short cannot be paired with base: 1 of base's prompts are missing "
                                         r"\(the first: prompt_0\)"):
        paired_test(base, [PerPrompt(scorer, rows[1:], "short")])
    with pytest.raises(InputError, match="another order"):
        paired_test(base, [PerPrompt(scorer, rows[::-1], "reversed")])
    with pytest.raises(InputError, match="unknown paired test 'z'"):
        paired_test(base, [base], "z")


def test_identical_systems_are_never_significant():
    """sacrebleu's strict count gives them p = 1 / (N + 1); no difference is no evidence: p = 1."""
    gold, lists = systems()
    scorer = Scorer(["map", "bleu_1x1"])
    base = per_prompt(scorer, gold, lists[0], "base")
    for test in ("bs", "ar"):
        result = paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], test, n_samples=200)
        assert [r.p_value for r in result["same"].values()] == [1.0, 1.0]
    assert paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], "t")["same"]["map"].p_value == 1.0


def test_systems_need_distinct_names():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base = per_prompt(scorer, gold, lists[0], "run")
    with pytest.raises(InputError, match="two systems are named 'run'"):
        paired_test(base, [per_prompt(scorer, gold, lists[1], "run")])


def test_identical_systems_under_the_t_test_get_p_one_and_bleu_refuses_it_for_selection():
    from nbest_eval.selection import judge_against_best

    gold, lists = systems()
    scorer = Scorer(["map", "bleu_1x1"])
    base = per_prompt(scorer, gold, lists[0], "base")
    assert paired_test(base, [per_prompt(scorer, gold, lists[0], "same")], "t")["same"]["map"].p_value == 1.0
    with pytest.raises(InputError, match="bleu_1x1 is no mean over prompts"):
        judge_against_best([base, per_prompt(scorer, gold, lists[1], "other")], 0, "bleu_1x1", "t")


def _api_systems():
    gold, lists = systems()
    scorer = Scorer(["map", "rr"])
    return gold, lists, per_prompt(scorer, gold, lists[0], "base"), per_prompt(scorer, gold, lists[1], "s0")


def _select_api(base, other, key):
    from nbest_eval.selection import select
    return select([base, other], key)


def _judge(base, other, key, test):
    from nbest_eval.selection import judge_against_best
    return judge_against_best([base, other], 0, key, test)


def _other_scorer(base, other):
    gold, lists = systems()[:2]
    return paired_test(base, [per_prompt(Scorer(["map", "p1"]), gold, lists[1], "t0")])


API = {  # a call on (baseline, other) -> what the InputError says
    "paired_test given one system, not a list": (lambda b, o: paired_test(b, o), "list of PerPrompt"),
    "paired_test given a dict as a system": (lambda b, o: paired_test(b, [{"map": 0.5}]), "must be a PerPrompt"),
    "paired_test given a string of keys": (lambda b, o: paired_test(b, [o], keys="map"), "list of measure keys"),
    "paired_test given an unknown key": (lambda b, o: paired_test(b, [o], keys=["bleu"]), "unknown measure 'bleu'"),
    "paired_test given no keys": (lambda b, o: paired_test(b, [o], keys=[]), "non-empty list"),
    "paired_test given 2.5 resamples": (lambda b, o: paired_test(b, [o], n_samples=2.5), "integer >= 1"),
    "paired_test given 0 resamples": (lambda b, o: paired_test(b, [o], "ar", n_samples=0), "integer >= 1"),
    "paired_test given a negative seed": (lambda b, o: paired_test(b, [o], seed=-1), "seed"),
    "paired_test given a string seed": (lambda b, o: paired_test(b, [o], seed="12345"), "seed"),
    "paired_test over two scorers": (_other_scorer, "different measures or options"),
    "select given an unknown key": (lambda b, o: _select_api(b, o, "bleu_1x1"), "unknown measure"),
    "judge_against_best t on an unknown key": (lambda b, o: _judge(b, o, "nope", "t"), "unknown measure"),
}


@pytest.mark.parametrize("call, message", API.values(), ids=API.keys())
def test_paired_api_refuses_what_it_cannot_take(call, message):
    _, _, base, other = _api_systems()
    with pytest.raises(InputError, match=re.escape(message)):
        call(base, other)


# --- the tests as objects: what callers read instead of branching on the kind of test ----------------------

def test_every_test_is_found_by_its_key_in_paired_s_order():
    assert list(TESTS) == ["bs", "ar", "t"]
    assert all(get_test(key).key == key and get_test(get_test(key)) is get_test(key) for key in TESTS)
    with pytest.raises(InputError, match=re.escape("unknown paired test 'z'; use one of: bs, ar, t")):
        get_test("z")
    with pytest.raises(InputError, match="unknown paired test"):
        get_test(["bs"])


def test_paired_help_is_what_paired_s_help_said():
    assert paired_help() == "paired bootstrap (bs), approximate randomization (ar) or paired t-test (t)"


def test_the_resampling_tests_default_to_sacrebleu_s_counts():
    assert {key: get_test(key).n_samples() for key in ("bs", "ar")} == PairedTest._DEFAULT_SAMPLES
    assert get_test("bs").n_samples(39) == 39 and get_test("ar").n_samples(7) == 7
    assert not get_test("t").resamples and get_test("t").n_samples(500) == 0  # the t-test ignores resamples
    assert DEFAULT_SAMPLES == {"bs": 1000, "ar": 10000, "t": 0}


@pytest.mark.parametrize("key, title, needs_mean, intervals, heading", [
    ("bs", "paired bootstrap", False, True, "paired bootstrap, 1000 resamples, seed 12345"),
    ("ar", "approximate randomization", False, False, "approximate randomization, 10000 trials, seed 12345"),
    ("t", "paired t-test", True, False, "paired t-test on per-prompt values"),
])
def test_a_test_says_what_it_is(key, title, needs_mean, intervals, heading):
    test = get_test(key)
    assert (test.title, test.needs_mean, test.gives_intervals) == (title, needs_mean, intervals)
    assert test.describe(test.n_samples(), 12345) == heading


def test_run_is_paired_test():
    gold, lists = systems()
    scorer = Scorer(["map"])
    base, other = per_prompt(scorer, gold, lists[0], "base"), per_prompt(scorer, gold, lists[1], "s0")
    for key in TESTS:
        assert get_test(key).run(base, [other], None, 12345) == paired_test(base, [other], key)


def test_check_mean_refuses_a_t_test_on_a_measure_that_is_no_mean():
    scorer = Scorer(["map", "bleu_1x1"])
    check_mean("t", scorer, "map")
    check_mean("bs", scorer, "bleu_1x1")
    with pytest.raises(InputError, match=re.escape("a paired t-test (t) compares per-prompt values, and bleu_1x1 is "
                                                   "no mean over prompts: use the paired bootstrap (bs) or the "
                                                   "approximate randomization (ar)")):
        check_mean("t", scorer, "bleu_1x1")


@pytest.mark.parametrize("args, expected", [
    (("bs", 1000, 12345), "bs:1000|seed:12345"),
    (("ar", 10000, None, 1000), "ar:10000|bs:1000|seed:none"),
    (("t", 0, 7, 1000), "t|bs:1000|seed:7"),
    (("t", 0, 7), "t"),
    (("bs", 39, 1, 1000), "bs:39|seed:1"),  # the bootstrap's own draws are its intervals'
])
def test_the_signature_names_the_test_s_resampling(args, expected):
    assert resampling(*args) == expected
    assert resampling(get_test(args[0]), *args[1:]) == expected
