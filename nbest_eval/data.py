"""The in-memory data model: a weighted gold set per prompt and an n-best list per prompt.

Readers in :mod:`nbest_eval.formats` produce these; the scorer consumes them. Nothing here knows
about files except :class:`InputError`, which carries the file and line that a problem came from.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple


class InputError(ValueError):
    """Bad user input, reported as ``FILE:LINE: message`` (file and line when known)."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None):
        self.path, self.line = path, line
        where = "" if path is None else (f"{path}:{line}: " if line is not None else f"{path}: ")
        super().__init__(where + message)


def prompt_id(text: str) -> str:
    """The STAPLE id of a prompt: ``prompt_`` + md5 of its lowercased text."""
    return "prompt_" + hashlib.md5(text.lower().encode("utf-8")).hexdigest()


class Hyp(NamedTuple):
    """One hypothesis of an n-best list. ``score`` is a natural-log model score (higher is better)."""

    text: str
    score: Optional[float] = None


@dataclass(frozen=True, eq=False)
class GoldPrompt:
    """One prompt with its valid translations, in file order (STAPLE lists the most frequent first).

    Compared and hashed by identity: scorers cache per-prompt reference statistics keyed on it.
    """

    id: str
    text: str
    translations: Tuple[Tuple[str, float], ...] = ()


class Gold:
    """An ordered collection of :class:`GoldPrompt`, looked up by id or by position."""

    def __init__(self, prompts: Sequence[GoldPrompt], path: Optional[str] = None):
        self.path = path
        self.prompts: List[GoldPrompt] = list(prompts)
        self._by_id: Dict[str, GoldPrompt] = {}
        self._digest: Optional[str] = None
        for prompt in self.prompts:
            if prompt.id in self._by_id:
                raise InputError(f"duplicate prompt id {prompt.id!r}", path)
            self._by_id[prompt.id] = prompt

    def __len__(self) -> int:
        return len(self.prompts)

    def __iter__(self) -> Iterator[GoldPrompt]:
        return iter(self.prompts)

    def __contains__(self, prompt_id: str) -> bool:
        return prompt_id in self._by_id

    def __getitem__(self, prompt_id: str) -> GoldPrompt:
        return self._by_id[prompt_id]

    def ids(self) -> List[str]:
        return [p.id for p in self.prompts]

    def digest(self) -> str:
        """sha256 of the prompts' ids, texts and weighted translations, in order: what a score
        depends on in the gold (computed once; the gold is not changed after reading)."""
        if self._digest is None:
            text = json.dumps([[p.id, p.text, p.translations] for p in self.prompts], ensure_ascii=False)
            self._digest = hashlib.sha256(text.encode()).hexdigest()
        return self._digest


#: An n-best list per prompt id, hypotheses in rank order (rank 1 first).
NBest = Dict[str, List[Hyp]]


def nbest_lists(nbest: Any, gold: Gold) -> NBest:
    """``{prompt_id: [hypothesis, ...]}`` checked as the file readers check a file: a mapping of gold
    prompt ids to lists (a plain string is no list of hypotheses), each hypothesis a string or a
    :class:`Hyp` whose score is None, finite or -inf; and at least one list (none scores all zeros)."""
    if not isinstance(nbest, Mapping):
        raise InputError(f"nbest must be a file or a mapping of prompt ids to lists, got {type(nbest).__name__}")
    if not nbest:
        raise InputError("no n-best list given (an empty mapping would score every prompt as an empty list)")
    lists = {}
    for prompt_id, hyps in nbest.items():
        if not isinstance(prompt_id, str) or prompt_id not in gold:
            where = f" {gold.path}" if gold.path else ""
            raise InputError(f"prompt id {prompt_id!r} is not in the gold{where}")
        if isinstance(hyps, (str, bytes)) or not isinstance(hyps, Iterable):
            raise InputError(f"prompt {prompt_id}: the hypotheses must be a list, got {type(hyps).__name__}")
        lists[prompt_id] = [_hyp(h, prompt_id, rank) for rank, h in enumerate(hyps, 1)]
    return lists


def _hyp(hyp: Any, prompt_id: str, rank: int) -> Hyp:
    where = f"prompt {prompt_id}, rank {rank}"
    if isinstance(hyp, str):
        return Hyp(hyp)
    if not isinstance(hyp, Hyp) or not isinstance(hyp.text, str):
        raise InputError(f"{where}: a hypothesis must be a string or a nbest_eval.Hyp(text, score), got {hyp!r:.60}")
    score = hyp.score
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or math.isnan(score) or score == math.inf):
        raise InputError(f"{where}: score {score!r:.60} is not a log-probability (a finite number, -inf or None)")
    return hyp
