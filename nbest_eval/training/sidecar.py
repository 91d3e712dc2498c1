"""The sidecar loop (issue 33): evaluate the snapshots training hands off (:mod:`nbest_eval.training.handoff`),
each exactly once, and decide on them in training order with the early-stopping rule the loop would use.

Several sidecars may share one queue: each claims the oldest unclaimed snapshot (a kernel lock),
evaluates it and places its result (write-once); whoever then holds the short verdict lock advances
the rule over the consecutive results not yet decided (:func:`decide_pending`). So evaluation may
run out of order while decisions are made in order, once, with the same decision core as the loop
(:meth:`EarlyStopping.decide` on the same per-prompt statistics), hence the same verdict and kept
snapshot. Evaluating is a :class:`SnapshotEvaluator`'s (a framework's, or :class:`ListsEvaluator`'s).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol

import numpy as np

from ..data import Gold, InputError
from ..files.output import write_text
from ..formats import read_nbest
from ..scorer import Scorer
from ..significance import PerPrompt
from ..stats import Stats
from .early_stopping import EarlyStopping, State
from .handoff import Entry, Queue, Tags, fault
from .handoff_files import read_json
from .heartbeat import HOST, Heartbeat, Liveness, trainer_status
from .rewind import held, step_of
from .stopping_state import prompts_digest

AFTER_STOP = "after the stop verdict (a loop run would not have trained it)"
UNTIL = ("trainer-done", "drained")


@dataclass
class Evaluation:
    """One snapshot evaluated: the values, the summed statistics, the per-prompt statistics the rule
    (and intervals, paired tests) need, timings in seconds, where its lists were saved."""

    values: Dict[str, Optional[float]]
    stats: Stats
    per_prompt: PerPrompt
    timings: Dict[str, float] = field(default_factory=dict)
    nbest: Optional[str] = None


class SnapshotEvaluator(Protocol):
    """What evaluates a snapshot: its scorer and gold (the statistics' layout and prompts), and
    :meth:`evaluate` (``path``: the snapshot, a file or a folder)."""

    scorer: Scorer
    gold: Gold

    def evaluate(self, path: str, tags: Tags) -> Evaluation: ...


class ListsEvaluator:
    """A "snapshot" that is an n-best file (any format :func:`~nbest_eval.formats.read_nbest` reads):
    scored against ``gold``. For tests and for watching lists a run saved (``--nbest-save-dir``)."""

    def __init__(self, gold: Gold, scorer: Scorer, format: str = "auto", nbest_size: Optional[int] = None):
        self.gold, self.scorer, self.format, self.nbest_size = gold, scorer, format, nbest_size

    def evaluate(self, path: str, tags: Tags) -> Evaluation:
        started = time.perf_counter()
        nbest = read_nbest(path, self.gold, self.format, nbest_size=self.nbest_size)
        scored = self.scorer.score(self.gold, nbest, keep_per_prompt=True)
        return Evaluation(scored.values, scored.stats, PerPrompt(self.scorer, scored.per_prompt, tags.name),
                          {"score_s": time.perf_counter() - started})


def rule_from_manifest(spec: Optional[Mapping[str, Any]]) -> Optional[EarlyStopping]:
    """The rule a manifest's ``stopping`` names (None: no rule)."""
    if spec is None:
        return None
    try:
        return EarlyStopping(**spec)
    except TypeError as err:
        raise InputError(f"the manifest's stopping rule is not one: {err}") from None


def result_of(entry: Entry, evaluation: Evaluation, started: float) -> Dict[str, Any]:
    """The JSON result of ``entry``: what the rule, intervals and paired tests need, and timings."""
    per_prompt = evaluation.per_prompt
    # absolute: a resume sets superseded lists aside by this path, from wherever it runs
    lists = None if evaluation.nbest is None else os.path.abspath(evaluation.nbest)
    return {"tags": entry.tags.as_dict(), "values": evaluation.values, "stats": dict(evaluation.stats),
            "per_prompt": {"ids_digest": prompts_digest(per_prompt.ids),
                           "statistics": list(per_prompt.scorer.stat_names), "rows": per_prompt.matrix.tolist()},
            "n_prompts": len(per_prompt), "lists": lists,
            "timings": {**evaluation.timings, "evaluated_at": time.time(), "evaluate_s": time.time() - started},
            "sidecar": {"host": HOST, "pid": os.getpid()}}


def per_prompt_of(queue: Queue, result: Mapping[str, Any], scorer: Scorer, gold: Gold) -> PerPrompt:
    """A result's per-prompt statistics, checked to be of ``gold``'s prompts in ``scorer``'s layout."""
    found, seq = result["per_prompt"], result["seq"]
    path = queue.path("results", f"{seq:06d}.json")
    ids, names = gold.ids(), list(scorer.stat_names)
    if found.get("ids_digest") != prompts_digest(ids) or found.get("statistics") != names:
        raise InputError("its per-prompt statistics are not of this gold's prompts in this scorer's layout", path)
    try:
        matrix = np.array(found.get("rows"), dtype=float)
    except (TypeError, ValueError):
        matrix = np.zeros(0)
    if matrix.shape != (len(ids), len(names)) or not np.isfinite(matrix).all():
        raise InputError(f"its per-prompt statistics are not {len(ids)} x {len(names)} finite numbers", path)
    return PerPrompt.from_matrix(scorer, ids, matrix, result["tags"].get("name", str(seq)))


@dataclass(frozen=True)
class BestValue:
    """What the sidecar keeps without an early-stopping rule: the validation with the best ``metric``
    so far (a later equal value replaces it, as fairseq's ``checkpoint_best.pt`` does), or none
    (``metric`` None: the best model is the framework's, by its loss); it never stops training.
    Evaluated snapshots it does not keep are deleted, so the queue's disk use stays bounded."""

    metric: Optional[str]
    maximize: bool = True

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> Optional[BestValue]:
        """The manifest's ``best`` (None where it has none: a queue made by hand keeps everything)."""
        spec = manifest.get("best")
        if spec is None:
            return None
        if not isinstance(spec, dict) or not isinstance(spec.get("metric"), (str, type(None))):
            raise InputError(f"the manifest's best is not one: {spec!r}")
        return cls(spec["metric"], bool(spec.get("maximize", True)))

    def keeps(self, value: Optional[float], kept: Optional[Mapping[str, Any]]) -> bool:
        if self.metric is None or value is None:
            return False
        if kept is None or kept.get("value") is None:
            return True
        return value >= kept["value"] if self.maximize else value <= kept["value"]


def fresh_verdict(stopping: Optional[EarlyStopping], best: Optional[BestValue] = None) -> Dict[str, Any]:
    return {"decided_through": 0, "decided": [], "validations": 0, "stop": False, "stop_seq": None,
            "kept": None, "keep": None if stopping is None and best is None else [], "explain": "",
            "state": None if stopping is None else State().to_dict(),
            "rule": None if stopping is None else stopping.describe()}


def decide_pending(queue: Queue, stopping: Optional[EarlyStopping], scorer: Scorer, gold: Gold,
                   best: Optional[BestValue] = None) -> List[int]:
    """Advance the rule (without one: ``best``) over the consecutive results after ``decided_through``,
    in order, under the verdict lock: keep, record the decision and the verdict, delete what is no
    longer kept. Skipped results, and results after a stop verdict, do not reach the rule. Returns
    the seqs handled."""
    handled: List[int] = []
    keeping = stopping is not None or best is not None
    with queue.verdict_lock():
        verdict = queue.read_verdict() or fresh_verdict(stopping, best)
        rule = None if stopping is None else stopping.describe()
        if verdict.get("rule") != rule:
            raise InputError(f"decided by another rule ({verdict.get('rule')}), not {rule}", queue.path("verdict.json"))
        state = None if stopping is None else \
            stopping.restore(verdict["state"], scorer, gold.ids(), None, gold.digest())
        superseded = queue.superseded()
        while (result := queue.result(_next_seq(verdict["decided_through"], superseded))) is not None:
            seq = result["seq"]
            verdict, state = _decide_one(queue, stopping, scorer, gold, verdict, state, result, best)
            verdict["keep"] = held(queue, verdict) if keeping else None
            queue.write_verdict(verdict)
            fault("verdict-written", seq)
            queue.reconcile(verdict)
            handled.append(seq)
        keep = held(queue, verdict) if keeping else None
        if not handled and keep != verdict["keep"] and queue.read_verdict() is not None:  # holds released
            verdict["keep"] = keep
            queue.write_verdict(verdict)
            queue.reconcile(verdict)
        if handled:
            _write_results_view(queue)
    return handled


def _next_seq(decided_through: int, superseded: set) -> int:
    """The seq to decide next: the first after ``decided_through`` that a resume did not set aside."""
    seq = decided_through + 1
    while seq in superseded:
        seq += 1
    return seq


def _decide_one(queue: Queue, stopping: Optional[EarlyStopping], scorer: Scorer, gold: Gold,
                verdict: Dict[str, Any], state: Optional[State], result: Mapping[str, Any],
                best: Optional[BestValue] = None):
    """Decide on one result; its decision record holds the verdict after it (``verdict_after``: what a
    resume rolls back to, :mod:`.rewind`) and its step."""
    seq, step = result["seq"], step_of(result["tags"])
    verdict = {**verdict, "decided_through": seq}
    reason = result.get("skipped") or result.get("not_evaluated") or (AFTER_STOP if verdict["stop"] else None)
    if reason is not None:
        _write_decision(queue, seq, step, verdict, {"not_decided": reason, "after_stop": verdict["stop"]})
        return verdict, state
    verdict["decided"] = decided = [*verdict["decided"], seq]
    verdict["validations"] = len(decided)
    if stopping is None:
        value = None if best is None or best.metric is None else result["values"].get(best.metric)
        if best is not None and best.keeps(value, verdict["kept"]):
            _keep(queue, seq)
            verdict.update(kept=_kept_record(queue, seq, step, value), explain=f"best {best.metric} so far: "
                                                                               f"{value:.4f} at step {step}")
        _write_decision(queue, seq, step, verdict, {"decision": None})
        return verdict, state
    after, decision = stopping.decide(state, stats=per_prompt_of(queue, result, scorer, gold), step=step,
                                      gold=gold.digest())
    if decision.kept not in (state.kept, decision.index):  # the rule keeps this validation or the one it kept
        raise RuntimeError(f"the rule moved the kept validation from {state.kept} to {decision.kept}")
    kept_seq = decided[decision.kept]
    if decision.kept == decision.index:
        _keep(queue, seq)
    verdict.update(stop=decision.stop, stop_seq=seq if decision.stop else None, keep=[kept_seq],
                   kept=_kept_record(queue, kept_seq, after.kept_step, after.kept_value),
                   explain=stopping.explain(decision), state=after.to_dict())
    _write_decision(queue, seq, step, verdict, {"decision": asdict(decision), "explain": stopping.explain(decision),
                                                "state_after": after.to_dict()})
    return verdict, after


def _keep(queue: Queue, seq: int) -> None:
    queue.keep(seq)  # before the verdict names it: a crash here is redone by reconcile
    fault("kept-moved", seq)


def _kept_record(queue: Queue, seq: int, step: Optional[int], value: Optional[float]) -> Dict[str, Any]:
    """The verdict's ``kept``: the snapshot, its step and value, and where its weights are."""
    kept = queue.find(seq)
    return {"seq": seq, "step": step, "value": value, "epoch": None if kept is None else kept.tags.epoch,
            "path": None if kept is None else os.path.relpath(kept.path, queue.root)}


def _write_decision(queue: Queue, seq: int, step: int, verdict: Mapping[str, Any], decision: Dict[str, Any]) -> None:
    queue.write_decision(seq, {**decision, "step": step, "verdict_after": verdict})
    fault("decision-written", seq)


def _write_results_view(queue: Queue) -> None:
    """``results.jsonl``: each result (without its per-prompt rows) with its decision, in order."""
    lines = []
    for seq, result in queue.results().items():
        path = queue.path("decisions", f"{seq:06d}.json")
        decision = read_json(path, "hand-off decision") if os.path.lexists(path) else None
        if isinstance(decision, dict):
            decision.pop("state_after", None)
            decision.pop("verdict_after", None)
        lines.append(json.dumps({**{k: v for k, v in result.items() if k != "per_prompt"}, "decided": decision}))
    write_text(queue.path("results.jsonl"), "".join(line + "\n" for line in lines), overwrite=True)


class Leader:
    """Rank 0 of a sidecar sharded over several processes (``nbest-eval watch`` under torchrun): it alone
    claims, places results and decides (:func:`watch`, with :meth:`sleep` as its ``sleep``). It tells
    the other ranks (``tell``, a broadcast) each snapshot before evaluating its own shard of it, and
    each time it waits, so that none waits in a collective for longer than a poll; :meth:`stop` ends them."""

    def __init__(self, evaluator: SnapshotEvaluator, tell: Callable[[Any], None]):
        self.evaluator, self.tell = evaluator, tell
        self.scorer, self.gold = evaluator.scorer, evaluator.gold

    def evaluate(self, path: str, tags: Tags) -> Evaluation:
        self.tell(("evaluate", path, tags))
        return self.evaluator.evaluate(path, tags)

    def sleep(self, seconds: float) -> None:
        self.tell(("wait",))
        time.sleep(seconds)

    def stop(self) -> None:
        self.tell(("stop",))


def follow(evaluator: SnapshotEvaluator, hear: Callable[[], Any]) -> int:
    """Another rank of a sharded sidecar: evaluate its shard of each snapshot the :class:`Leader` names
    (``hear``: its next message), until it stops; never touches the queue. Returns how many."""
    count = 0
    while (message := hear())[0] != "stop":
        if message[0] == "evaluate":
            evaluator.evaluate(message[1], message[2])
            count += 1
    return count


@dataclass
class WatchSummary:
    """What :func:`watch` did: the seqs it evaluated, those it marked not evaluated (after a stop),
    why it ended ("drained", "trainer-done", "trainer-failed", "trainer-dead") and the verdict then."""

    evaluated: List[int]
    not_evaluated: List[int]
    reason: str
    verdict: Optional[Dict[str, Any]]


def watch(queue: Queue, evaluator: SnapshotEvaluator, stopping: Optional[EarlyStopping], *,
          until: str = "trainer-done", poll: float = 1.0, evaluate_after_stop: bool = False,
          on_result: Optional[Callable[[int, Dict[str, Any]], None]] = None, heartbeat: Optional[Heartbeat] = None,
          liveness: Optional[Liveness] = None, sleep: Callable[[float], None] = time.sleep,
          best: Optional[BestValue] = None) -> WatchSummary:
    """Evaluate the queue's snapshots, oldest unclaimed first, and decide on them in order, until
    the queue is drained (``until="drained"``) or, by default, until the trainer is done, failed or
    dead and the queue is drained (a queue with no trainer heartbeat yet is waited on)."""
    if until not in UNTIL:
        raise InputError(f"unknown until {until!r}; use one of: {', '.join(UNTIL)}")
    liveness = liveness or Liveness()
    evaluated, not_evaluated = [], []
    queue.reconcile()
    while True:
        stopped = bool((queue.read_verdict() or {}).get("stop"))
        claim = queue.claim_next({"host": HOST})
        if claim is not None:
            with claim:
                entry = claim.entry
                fault("claimed", entry.seq)
                if heartbeat is not None:
                    heartbeat.beat(seq=entry.seq)
                if stopped and not evaluate_after_stop:
                    queue.put_result(entry.seq, {"tags": entry.tags.as_dict(), "not_evaluated": AFTER_STOP})
                    not_evaluated.append(entry.seq)
                else:
                    started = time.time()
                    result = result_of(entry, evaluator.evaluate(entry.path, entry.tags), started)
                    queue.put_result(entry.seq, result)
                    fault("result-placed", entry.seq)
                    evaluated.append(entry.seq)
                    if on_result is not None:
                        on_result(entry.seq, result)
        decide_pending(queue, stopping, evaluator.scorer, evaluator.gold, best)
        if claim is not None:
            continue
        status = "absent" if until == "drained" else trainer_status(queue, liveness)  # read before listing
        if not queue.waiting() and status != "training" and (until == "drained" or status != "absent"):
            # releases what the trainer's end saved
            decide_pending(queue, stopping, evaluator.scorer, evaluator.gold, best)
            reason = "drained" if until == "drained" else f"trainer-{status}"
            if heartbeat is not None:
                heartbeat.beat(state="done", seq=None)
            return WatchSummary(evaluated, not_evaluated, reason, queue.read_verdict())
        if heartbeat is not None:
            heartbeat.beat(seq=None)
        sleep(poll)
