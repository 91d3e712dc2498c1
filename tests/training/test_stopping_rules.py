"""The table of early-stopping rules: what every help text and docs/early-stopping.md read, and
each rule's own judgement of a validation, on hand-made states."""

from enum import Enum
from pathlib import Path

import pytest

from nbest_eval.data import InputError
from nbest_eval.training.early_stopping import (
    DEFAULT_RULE,
    RULES,
    EarlyStopping,
    Observation,
    State,
    judge_declined,
    judge_significant,
    judge_strict,
    rules_help,
    rules_markdown,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("page", ["early-stopping.md", "fairseq.md"])
def test_docs_show_the_code_s_rule_table(page):
    assert rules_markdown() in (DOCS / page).read_text(encoding="utf-8")


def test_rules_help_names_every_rule_once_and_marks_the_default():
    text = rules_help()
    for name, rule in RULES.items():
        label = f"{name} (default)" if name == DEFAULT_RULE else name
        assert text.count(f"{label}: {rule.summary}") == 1
    assert text.count("(default)") == 1 and "proportional (default):" in text


@pytest.mark.parametrize("name", list(RULES))
def test_a_summary_is_one_line_that_joins_and_argparse_keep_whole(name):
    summary = RULES[name].summary
    assert summary and "\n" not in summary and ";" not in summary and "%" not in summary


def test_the_default_is_a_rule_and_an_unknown_rule_is_refused():
    assert DEFAULT_RULE in RULES and EarlyStopping().rule == DEFAULT_RULE
    with pytest.raises(InputError, match="unknown stopping rule 'patient'; use one of: strict, significant, "
                                         "proportional, declined"):
        EarlyStopping(rule="patient")
    with pytest.raises(InputError, match="unknown stopping rule"):
        EarlyStopping(rule=["strict"])


class Choice(Enum):
    """As fairseq's ChoiceEnum members: equal to their name (and hashed as it), but no str."""

    strict = "strict"
    proportional = "proportional"

    def __eq__(self, other):
        return self.value == other

    def __hash__(self):
        return hash(self.value)


@pytest.mark.parametrize("choice", list(Choice))
def test_a_rule_named_by_fairseq_s_choice_enum_is_that_rule(choice):
    rule = EarlyStopping(rule=choice)
    assert type(rule.rule) is str and rule.rule == choice.value and rule.definition is RULES[choice.value]


def _state(reference_value, kept_value=None, kept=1):
    return State(seen=3, warming_up=False, reference=1, reference_value=reference_value, kept=kept,
                 kept_value=reference_value if kept_value is None else kept_value)


@pytest.mark.parametrize("value, improved, kept", [(0.6, True, 3), (0.5, False, 3), (0.4, False, 1),
                                                   (None, False, 1)])
def test_strict_progress_is_any_better_value_and_a_tie_is_kept(value, improved, kept):
    judged = judge_strict(EarlyStopping(rule="strict"), _state(0.5), 3, Observation(value))
    assert (judged.improved, judged.kept, judged.p_value, judged.counts) == (improved, kept, None, True)


def test_strict_minimizing_turns_better_around():
    judged = judge_strict(EarlyStopping(rule="strict", maximize=False), _state(0.5), 3, Observation(0.4))
    assert judged.improved and judged.kept == 3


def test_significant_without_statistics_is_no_progress_but_keeps_a_tie():
    # nothing to test against (p = 1): a better value is no progress; an equal one is kept in place
    rule = EarlyStopping(rule="significant")
    better = judge_significant(rule, _state(0.5), 3, Observation(0.9))
    tied = judge_significant(rule, _state(0.5), 3, Observation(0.5))
    assert (better.improved, better.kept, better.p_value) == (False, 1, 1.0)
    assert (tied.improved, tied.kept, tied.p_value) == (False, 3, 1.0)


def test_significant_a_first_defined_value_is_progress():
    judged = judge_significant(EarlyStopping(rule="significant"), _state(None), 3, Observation(0.1))
    assert judged.improved and judged.kept == 3


@pytest.mark.parametrize("value, improved, kept, counts", [(0.5, True, 3, True), (0.7, True, 3, True),
                                                           (0.4, False, 1, False), (None, False, 1, False)])
def test_declined_counts_only_a_significant_decline(value, improved, kept, counts):
    # without statistics a worse value is not significantly worse (p = 1): it does not count
    judged = judge_declined(EarlyStopping(rule="declined"), _state(0.5), 3, Observation(value))
    assert (judged.improved, judged.kept, judged.counts) == (improved, kept, counts)
    assert judged.p_value == (None if improved else 1.0)


@pytest.mark.parametrize("name, tests, grows", [("strict", False, False), ("significant", True, False),
                                                ("proportional", True, True), ("declined", True, False)])
def test_the_table_s_flags_drive_the_rule(name, tests, grows):
    rule = EarlyStopping(rule=name, patience=2, warmup=0)
    assert rule.needs_statistics is tests
    assert rule.patience_at(5) == (5 if grows else 2)
