"""Early stopping that tells progress from noise: one decision for every training loop and replay.

A validation is an observation of the selection measure: its value and, for the rules that test,
its per-prompt statistics (a :class:`~nbest_eval.significance.PerPrompt`). :meth:`EarlyStopping.decide`
takes the state so far and one observation and returns the next state and a :class:`Decision`;
nothing else is kept. So the state (a few counters and the reference validation's statistics, the
measure's columns only) is what a checkpoint saves to resume, and every worker of a distributed
run reaches the same decision from the same all-reduced statistics. The fairseq task, the Hugging
Face callback, ``nbest-eval select --stopping`` and ``scripts/staple_en_pt.py`` all decide here.

The rules (:data:`RULES`, one line each: :func:`rules_help`; at length: docs/early-stopping.md and
each rule's function) differ in what counts as progress, when they stop and what they keep; the
default, ``proportional``, was chosen on the replays of real runs in BENCHMARKS.md.

Warm-up (Keras' ``start_from_epoch``, but measured rather than guessed): no patience is counted
while the measure has not left its starting floor. By default (``warmup=None``, except for
``strict``) it lasts until a validation is significantly better than the first: an exact-match
measure such as MAP is 0 until the model first gets a translation right, and a validation that
merely equals 0 again is no evidence of a plateau. ``warmup=N`` counts no patience in the first N
validations instead. A run whose measure never leaves the floor never stops early.

Ties: a validation whose value equals the kept one's exactly is kept in its place, under every rule
(the latest of tied validations: more training, the same measured quality). A run whose MAP is 0 at
every validation thus keeps its last validation, not silently its first, and :meth:`EarlyStopping.conclusion`
says so at the end of training. An undefined value (None) is never an improvement.

alpha must be above 1 / (N + 1), the smallest p-value N paired-bootstrap resamples give: below it no
validation could ever be significantly better, so such an alpha is refused wherever a rule is made
(the fairseq task, the Hugging Face callback, ``select``'s replay). A state that a checkpoint saved
is read back only through :meth:`EarlyStopping.restore`, which checks it against itself and the
run (:mod:`nbest_eval.training.stopping_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..data import InputError
from ..scorer import Scorer
from ..significance import BOOTSTRAP_RESAMPLES, DEFAULT_ALPHA, DEFAULT_SEED, PairedBootstrap, PerPrompt
from .stopping_state import Rows, State, measure_name, prompts_digest, restored

DEFAULT_RULE = "proportional"
#: warm-up until a validation is significantly better than the first
UNTIL_SIGNIFICANT = "significant"


@dataclass(frozen=True)
class Observation:
    """One validation as :meth:`EarlyStopping.decide` sees it: its value, the measure's own per-prompt
    statistics (None where the rule needs none) as a PerPrompt and as rows, the caller's step, and
    the state's record of what the statistics are of (prompts, measure, statistics, gold)."""

    value: Optional[float]
    measure: Optional[PerPrompt] = None
    rows: Optional[Rows] = None
    step: Optional[int] = None
    recorded: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """What a rule makes of a validation after the first: whether it is progress, the validation now
    kept, the p-value of its test (None where it did not test), and whether, being no progress, it
    counts against patience."""

    improved: bool
    kept: Optional[int]
    p_value: Optional[float] = None
    counts: bool = True


def judge_strict(rule: EarlyStopping, state: State, index: int, seen: Observation) -> Judgement:
    """fairseq's ``--patience`` and transformers' ``EarlyStoppingCallback`` (threshold 0): any strictly
    better value is progress. Kept: the latest validation at least as good as the best (fairseq's
    ``checkpoint_best.pt``, rewritten on a tie)."""
    improved = rule.better(seen.value, state.reference_value)
    kept = index if improved or _equal(seen.value, state.reference_value) else state.kept
    return Judgement(improved, kept)


def judge_significant(rule: EarlyStopping, state: State, index: int, seen: Observation) -> Judgement:
    """Progress is a validation significantly better than the reference, the last progress (paired
    bootstrap over prompts, two-sided p < alpha, and better); a first defined value is progress
    over an undefined one, with nothing to test. Kept: the reference, or a later validation tied
    with it (the latest), so that the kept checkpoint moves up only when the validation set can
    tell it is better."""
    p = rule.p_against(seen.measure, state.reference_rows)
    improved = rule.better(seen.value, state.reference_value) and (state.reference_value is None or p < rule.alpha)
    kept = index if improved or _equal(seen.value, state.kept_value) else state.kept
    return Judgement(improved, kept, p)


def judge_declined(rule: EarlyStopping, state: State, index: int, seen: Observation) -> Judgement:
    """Progress is a value at least the best so far (kept: the latest of equals); a validation counts
    against patience only where it is significantly worse than the best, so only a real decline
    stops training, a plateau never does."""
    improved = seen.value is not None and not rule.better(state.reference_value, seen.value)
    if improved:
        return Judgement(True, index)
    p = rule.p_against(seen.measure, state.reference_rows)
    return Judgement(False, state.kept, p, p < rule.alpha)


@dataclass(frozen=True)
class Rule:
    """One early-stopping rule: its name, the one line that every help text and docs/early-stopping.md
    show (:func:`rules_help`), and how it judges a validation. ``tests``: it tests per-prompt
    statistics (and so warms up until significant by default); ``significant_reference``: its
    reference moves only on significant progress; ``grows_patience``: after progress at
    validation t it waits max(P, t) validations (the "patience increase" of Bengio's recipe: a curve
    that needed 30 validations to improve significantly gets 30 more before it is called flat)."""

    name: str
    summary: str
    judge: Callable[[EarlyStopping, State, int, Observation], Judgement]
    tests: bool = True
    significant_reference: bool = False
    grows_patience: bool = False


#: every rule by name, in the order help texts list them
RULES: Dict[str, Rule] = {rule.name: rule for rule in (
    Rule("strict", "fairseq's and transformers' own rule: progress is any strictly better value, stop after P "
                   "validations without progress, keep the latest of the best values", judge_strict, tests=False),
    Rule("significant", "progress is a validation significantly better than the last progress (paired bootstrap "
                        "over prompts, p < alpha), stop after P validations without progress, keep the last "
                        "progress", judge_significant, significant_reference=True),
    Rule("proportional", "as significant, but after progress at validation t stop only after max(P, t) "
                         "validations without progress, so that a slow creep is not cut short", judge_significant,
         significant_reference=True, grows_patience=True),
    Rule("declined", "stop once P validations in a row are significantly worse than the best so far (a plateau "
                     "never stops), keep the best so far", judge_declined),
)}


def rule_label(name: str) -> str:
    """A rule's name as help texts and docs show it: the default marked."""
    return f"{name} (default)" if name == DEFAULT_RULE else name


def rules_help() -> str:
    """Every rule in one line each, the default marked: the help of every option that picks a rule."""
    return "; ".join(f"{rule_label(name)}: {rule.summary}" for name, rule in RULES.items())


def rules_markdown() -> str:
    """The rules as docs/early-stopping.md shows them (tests/training checks the page holds it)."""
    rows = [f"| `{name}`{rule_label(name)[len(name):]} | {rule.summary} |" for name, rule in RULES.items()]
    return "\n".join(["| rule | with patience P |", "|---|---|", *rows])


@dataclass(frozen=True)
class Decision:
    """What the rule makes of one validation.

    ``improved``: it counts as progress (patience starts again); ``kept``: the index of the
    validation whose checkpoint the rule keeps now (this one or an earlier one); ``runs``: the
    validations in a row that counted against patience; ``warming_up``: no patience is counted yet;
    ``stop``: training stops after this validation; ``p_value``: this validation against the one
    the rule compared it with (None where the rule did not test); ``patience``: the runs that stop
    training now."""

    index: int
    improved: bool
    kept: int
    runs: int
    warming_up: bool
    stop: bool
    p_value: Optional[float] = None
    patience: int = 0  # the runs that stop training at this point


@dataclass(frozen=True)
class EarlyStopping:
    """A stopping rule and its settings (see the module docstring). ``key``: the measure; it
    must be one whose per-prompt statistics the caller passes, unless the rule needs none
    (:attr:`needs_statistics`)."""

    key: str = "map"
    rule: str = DEFAULT_RULE
    patience: int = 3
    maximize: bool = True
    alpha: float = DEFAULT_ALPHA
    warmup: Union[int, str, None] = None  # None: the rule's default; UNTIL_SIGNIFICANT; or a count
    n_samples: int = BOOTSTRAP_RESAMPLES
    seed: int = DEFAULT_SEED
    _warmup: Union[int, str] = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self):
        name = next((name for name in RULES if name == self.rule), None)
        if name is None:
            raise InputError(f"unknown stopping rule {self.rule!r}; use one of: {', '.join(RULES)}")
        object.__setattr__(self, "rule", name)  # the plain name, also where fairseq passes a ChoiceEnum member
        if not isinstance(self.patience, int) or isinstance(self.patience, bool) or self.patience < 1:
            raise InputError(f"patience must be an integer >= 1, got {self.patience!r}")
        if not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise InputError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not isinstance(self.n_samples, int) or self.n_samples < 1:
            raise InputError(f"n_samples must be an integer >= 1, got {self.n_samples!r}")
        warmup = self.warmup
        if warmup is None:
            warmup = UNTIL_SIGNIFICANT if self.definition.tests else 0
        elif isinstance(warmup, str) and warmup != UNTIL_SIGNIFICANT:
            try:
                warmup = int(warmup)
            except ValueError:
                raise InputError(f"warm-up must be {UNTIL_SIGNIFICANT!r} or a number of validations, "
                                 f"got {self.warmup!r}") from None
        if not isinstance(warmup, str) and (not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0):
            raise InputError(f"warm-up must be {UNTIL_SIGNIFICANT!r} or a number of validations >= 0, "
                             f"got {self.warmup!r}")
        object.__setattr__(self, "_warmup", warmup)
        self._check_alpha()

    def _check_alpha(self) -> None:
        """Refuse an alpha that the paired bootstrap cannot go below: its p-value is (c + 1) / (N + 1)
        (:func:`~nbest_eval.significance.p_value`), so never below 1 / (N + 1) with N resamples, and
        a rule that tests would never see a significant difference (a run that improves would keep
        its first validation). Only where the rule tests: ``strict`` without the warm-up until
        significant does not."""
        smallest = 1 / (self.n_samples + 1)  # computed as paired_test computes its p-values, at c = 0
        if self.needs_statistics and not smallest < self.alpha:
            raise InputError(f"alpha {self.alpha} is out of reach: with {self.n_samples} paired-bootstrap resamples "
                             f"the smallest p-value is 1 / ({self.n_samples} + 1) = {smallest:.4g}, and only a p-value "
                             f"below alpha is significant, so no validation could ever count as significantly better "
                             f"or worse; use an alpha above 1 / {self.n_samples + 1} = {smallest!r} (exactly)")

    @property
    def definition(self) -> Rule:
        """The rule's entry in :data:`RULES`."""
        return RULES[self.rule]

    @property
    def needs_statistics(self) -> bool:
        """Whether :meth:`decide` needs per-prompt statistics (all rules but ``strict`` test, and so
        does the warm-up until significant)."""
        return self.definition.tests or self._warmup == UNTIL_SIGNIFICANT

    @property
    def _floor(self) -> bool:
        """Whether the rule warms up against the first validation's statistics (until significant,
        where its reference moves on any progress)."""
        return self._warmup == UNTIL_SIGNIFICANT and not self.definition.significant_reference

    def describe(self) -> str:
        warmup = ("until significantly better than the first validation" if self._warmup == UNTIL_SIGNIFICANT
                  else f"{self._warmup} validation(s)" if self._warmup else "none")
        test = f", alpha {self.alpha}" if self.needs_statistics else ""
        return f"{self.rule} on {self.key}, patience {self.patience}, warm-up {warmup}{test}"

    def patience_at(self, reference: int) -> int:
        """Validations without improvement that stop training while the reference is validation
        ``reference`` (0-based): P, or for ``proportional`` at least as many as led up to it."""
        return max(self.patience, reference) if self.definition.grows_patience else self.patience

    def explain(self, decision: Decision) -> str:
        """One line for a training log: what this validation counted as, and whether training stops."""
        grown = f"; patience grew to the {decision.patience} validations the last improvement took" \
            if decision.patience > self.patience else ""
        what = ("warming up" if decision.warming_up else "improved" if decision.improved else
                f"{decision.runs} of {decision.patience} without improvement")
        p = "" if decision.p_value is None else f" (p = {decision.p_value:.4g})"
        return (f"{self.rule} on {self.key}: validation {decision.index + 1} {what}{p}{grown}" +
                ("; stop" if decision.stop else ""))

    def conclusion(self, state: State, unit: str = "validation") -> str:
        """One line for the end of training: what the rule kept and why, and whether it ever left
        warm-up (``unit``: the caller's name for :attr:`State.kept_step`, e.g. "update", "step")."""
        if state.kept is None:
            return f"{self.rule} on {self.key}: no validation seen, nothing kept"
        step = "" if state.kept_step is None else f"{unit} {state.kept_step}, "
        value = "undefined" if state.kept_value is None else f"{state.kept_value:.4g}"
        line = (f"{self.rule} on {self.key}: kept validation {state.kept + 1} ({step}{self.key} {value}), "
                f"{self._why(state)}")
        line += f"; stopped after validation {state.seen}" if state.stopped else \
            f"; {state.seen} validation(s), no stop"
        if state.warming_up:
            line += ("; the rule never left warm-up (no validation was significantly better than the first)"
                     if self._warmup == UNTIL_SIGNIFICANT else f"; still in its {self._warmup}-validation warm-up")
        return line

    def _why(self, state: State) -> str:
        """Why the rule keeps ``state.kept``."""
        tied = state.reference is not None and state.kept != state.reference
        if self.definition.significant_reference:
            if tied:
                return f"the latest validation tied with validation {state.reference + 1} (ties keep the latest)"
            return ("the first validation (none was significantly better)" if state.reference == 0 else
                    "its last significant improvement")
        return "the latest of the best values"

    def restore(self, data: Any, scorer: Scorer, ids: Sequence[str], step: Optional[int],
                gold: Optional[str] = None) -> State:
        """A saved state (:meth:`State.to_dict`) to go on from, checked against itself and this run
        (:func:`~nbest_eval.training.stopping_state.restored`: ``scorer`` computes the measure, ``ids`` are
        the validation's prompts, ``step`` the caller's current one, ``gold`` their gold's digest);
        InputError names what is wrong. The fairseq task and the HF callback read every rule state
        they resume from here."""
        return restored(data, scorer, self.key, ids, step, self._floor, gold)

    def decide(self, state: State, value: Optional[float] = None, stats: Optional[PerPrompt] = None,
               step: Optional[int] = None, gold: Optional[str] = None) -> Tuple[State, Decision]:
        """The next state and this validation's decision. ``stats``: the validation's per-prompt
        statistics (a PerPrompt whose scorer computes ``key``); ``value`` is then theirs. ``step``:
        the caller's name for this validation (fairseq's update, the Trainer's global step),
        remembered as ``kept_step`` while it is kept. ``gold``: the digest of the gold the
        statistics were computed against (:meth:`~nbest_eval.data.Gold.digest`), recorded so that
        a resumed run refuses a state of another gold (:meth:`restore`)."""
        if self.needs_statistics and stats is None:
            raise InputError(f"the {self.rule!r} stopping rule (or its warm-up) tests per-prompt statistics, and "
                             f"none were given for {self.key}")
        if state.stopped:  # resumed after the rule stopped (a requeued job): it stops again, keeping the same
            return replace(state, seen=state.seen + 1), Decision(
                index=state.seen, improved=False, kept=state.kept, runs=state.runs, warming_up=False, stop=True,
                patience=self.patience_at(state.reference))
        seen = self._observe(state, value, stats, step, gold)
        return self._first(seen) if state.seen == 0 else self._next(state, seen)

    def _observe(self, state: State, value: Optional[float], stats: Optional[PerPrompt], step: Optional[int],
                 gold: Optional[str]) -> Observation:
        """This validation: its value is its statistics' where they are given."""
        recorded = {"prompts": state.prompts, "measure": state.measure, "statistics": state.statistics,
                    "gold": gold or state.gold}
        if stats is None:
            return Observation(value, step=step, recorded=recorded)
        measure, rows, digest = self._measure(stats, state)
        recorded.update(prompts=digest, measure=measure_name(measure.scorer, self.key),
                        statistics=list(measure.scorer.stat_names))
        return Observation(measure.scores()[self.key], measure, rows, step, recorded)

    def _first(self, seen: Observation) -> Tuple[State, Decision]:
        """The first validation: the reference and the kept one, progress by definition."""
        warming = self._warmup == UNTIL_SIGNIFICANT or self._warmup > 0
        state = State(seen=1, warming_up=warming, runs=0, stopped=False, reference=0, reference_value=seen.value,
                      reference_rows=seen.rows, floor_rows=seen.rows if self._floor else None, kept=0,
                      kept_value=seen.value, kept_step=seen.step, **seen.recorded)
        return state, Decision(index=0, improved=True, kept=0, runs=0, warming_up=warming, stop=False,
                               patience=self.patience)

    def _next(self, state: State, seen: Observation) -> Tuple[State, Decision]:
        """A later validation, judged by the rule (:data:`RULES`), then warm-up and patience counted."""
        index = state.seen
        judged = self.definition.judge(self, state, index, seen)
        warming = state.warming_up and self._still_warming(state, index, judged.improved, seen.measure)
        runs = 0 if warming or judged.improved else state.runs + 1 if judged.counts else 0
        moved = {"reference": index, "reference_value": seen.value, "reference_rows": seen.rows} \
            if judged.improved else {}
        kept = {"kept_value": seen.value, "kept_step": seen.step} if judged.kept == index else {}
        patience = self.patience_at(index if judged.improved else state.reference)
        stop = not warming and runs >= patience
        new = replace(state, seen=index + 1, warming_up=warming, runs=runs, stopped=stop,
                      floor_rows=state.floor_rows if warming else None, kept=judged.kept, **moved, **kept,
                      **seen.recorded)
        return new, Decision(index=index, improved=judged.improved, kept=judged.kept, runs=runs, warming_up=warming,
                             stop=stop, p_value=judged.p_value, patience=patience)

    def _still_warming(self, state: State, index: int, improved: bool, measure: Optional[PerPrompt]) -> bool:
        """Whether warm-up goes on after validation ``index`` (warm-up was on before it)."""
        if self._warmup != UNTIL_SIGNIFICANT:
            return index < self._warmup
        if self.definition.significant_reference:  # its reference is the first validation until progress
            return not improved
        return not self._significantly_better(measure, state.floor_rows)

    def replay(self, values: Sequence[Optional[float]], stats: Optional[Sequence[PerPrompt]] = None
               ) -> Tuple[List[Decision], Optional[int]]:
        """Every validation's decision in order until the rule stops, and the index of the stopping
        validation (None: it never stops)."""
        state, decisions = State(), []
        for i, value in enumerate(values):
            state, decision = self.decide(state, value, None if stats is None else stats[i])
            decisions.append(decision)
            if decision.stop:
                return decisions, i
        return decisions, None

    # -- helpers --------------------------------------------------------------------------------

    def better(self, a: Optional[float], b: Optional[float]) -> bool:
        """Whether ``a`` is strictly better than ``b`` (an undefined value is never better; anything defined
        is better than an undefined one)."""
        if a is None:
            return False
        if b is None:
            return True
        return a > b if self.maximize else a < b

    def _measure(self, stats: PerPrompt, state: State) -> Tuple[PerPrompt, Rows, str]:
        """The measure's own statistics of ``stats`` (as a PerPrompt and as rows) and the prompts'
        digest, checked against the state's."""
        if self.key not in stats.scorer.keys:
            raise InputError(f"the stopping rule's measure {self.key} is not among the statistics given "
                             f"({', '.join(stats.scorer.keys)})")
        digest = prompts_digest(stats.ids)
        if state.prompts is not None and digest != state.prompts:
            raise InputError("this validation's prompts are not the earlier validations'; a stopping rule compares "
                             "validations of the same prompts")
        scorer = stats.scorer.restricted(self.key)
        matrix = stats.matrix[:, [stats.scorer.stat_names.index(n) for n in scorer.stat_names]]
        return PerPrompt.from_matrix(scorer, stats.ids, matrix, "validation"), matrix.tolist(), digest

    def p_against(self, measure: Optional[PerPrompt], base: Optional[Rows]) -> float:
        """Two-sided paired bootstrap p-value of ``measure`` against the validation whose rows are
        ``base`` (1 where there is nothing to compare)."""
        if measure is None or base is None:
            return 1.0
        other = PerPrompt.from_matrix(measure.scorer, measure.ids, np.array(base, dtype=float), "reference")
        result = PairedBootstrap().run(other, [measure], self.n_samples, self.seed, [self.key])
        p = result[measure.name][self.key].p_value
        return 1.0 if p is None else p

    def _significantly_better(self, measure: Optional[PerPrompt], base: Optional[Rows]) -> bool:
        if measure is None or base is None:
            return False
        floor = PerPrompt.from_matrix(measure.scorer, measure.ids, np.array(base, dtype=float)).scores()[self.key]
        value = measure.scores()[self.key]
        return self.better(value, floor) and (floor is None or self.p_against(measure, base) < self.alpha)


def _equal(a: Optional[float], b: Optional[float]) -> bool:
    return a is not None and b is not None and a == b


