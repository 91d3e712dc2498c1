"""Reading one worker's shard of a grouped n-best file without parsing the other workers' lines.

With ``score --jobs N`` every worker reads the file itself and scores its own prompts (sending lists
between processes costs more than reading). Parsing a line costs several times reading it, so where
a format names a line's prompt cheaply (tsv: the first field; moses: the sentence number) a worker
leaves out the lines of the prompts it does not score; their own worker parses and checks them.

A reader sees whether a prompt's lines are contiguous only among the lines it parses, so the lines
left out are still checked for that here: a prompt that comes back after another raises
:class:`Ungrouped` (the file is then read whole, as it is with one worker), and never makes two
separate runs of a prompt's lines look like one.
"""

from __future__ import annotations

from typing import Callable, Container, Dict, Optional, Set

from ..data import Gold
from .common import Line, Ungrouped, parse_digits
from .moses import SEPARATOR


def _tsv_prompt(text: str, gold: Gold) -> Optional[str]:
    return text.split("\t", 1)[0]


def _moses_prompt(text: str, gold: Gold) -> Optional[str]:
    sentence = parse_digits(text.split(SEPARATOR, 1)[0].strip(" "))
    return gold.prompts[sentence].id if sentence is not None and sentence < len(gold) else None


#: the formats whose lines name their prompt cheaply: format -> (line text, gold) -> prompt id, or None
PROMPT_OF_LINE: Dict[str, Callable[[str, Gold], Optional[str]]] = {"tsv": _tsv_prompt, "moses": _moses_prompt}


class OtherShards:
    """:meth:`LineSource.leave_out`'s test for one shard: true for a line of a gold prompt outside
    ``shard`` (counted in ``left_out``). Lines that name no gold prompt (blank lines, a header, an
    unknown id) stay, for the reader to skip or report."""

    def __init__(self, gold: Gold, format: str, shard: Container[str], path: str):
        self.gold, self.shard, self.path = gold, shard, path
        self.prompt_of = PROMPT_OF_LINE[format]
        self.current: Optional[str] = None
        self.finished: Set[str] = set()
        self.left_out = 0

    def __call__(self, line: Line) -> bool:
        number, text = line
        prompt_id = self.prompt_of(text, self.gold)
        if prompt_id is None or prompt_id not in self.gold:
            return False
        if prompt_id != self.current:
            if prompt_id in self.finished:
                raise Ungrouped(prompt_id, self.path, number)
            if self.current is not None:
                self.finished.add(self.current)
            self.current = prompt_id
        if prompt_id in self.shard:
            return False
        self.left_out += 1
        return True
