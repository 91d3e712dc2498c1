"""A few n-best lists as text for a training log (fairseq's ``--nbest-print-samples``, the Hugging
Face callback's ``print_samples``): a look at what the numbers score. Each hypothesis is marked ``*``
when it is a valid translation (as the metrics match them), under its prompt, with the prompt's most
frequent gold translations below.
"""

from __future__ import annotations

from typing import Sequence

from ..data import GoldPrompt, Hyp
from ..prompt import PromptGold, norm

#: gold translations shown under a sample (the most frequent first)
SAMPLE_REFERENCES = 3


def samples_text(when: str, prompts: Sequence[GoldPrompt], lists: Sequence[Sequence[Hyp]], of: int) -> str:
    """The n-best ``lists`` of ``prompts`` (of ``of`` validated), headed by ``when`` (e.g. "step 80")."""
    lines = [f"n-best samples at {when} ({len(prompts)} of {of} prompts; * a valid translation):"]
    lines += [format_list(prompt, hyps) for prompt, hyps in zip(prompts, lists)]
    return "\n".join(lines)


def format_list(prompt: GoldPrompt, hyps: Sequence[Hyp]) -> str:
    """One prompt, its hypotheses one a line (rank, mark, text, score) and its first gold translations."""
    valid = PromptGold(prompt).weights
    lines = [f"  {prompt.id}: {prompt.text}"]
    for rank, hyp in enumerate(hyps, 1):
        score = "" if hyp.score is None else f"  ({hyp.score:.4g})"
        lines.append(f"    {rank:>2} {'*' if norm(hyp.text) in valid else ' '} {hyp.text}{score}")
    shown = " | ".join(text for text, _ in prompt.translations[:SAMPLE_REFERENCES])
    more = len(prompt.translations) - SAMPLE_REFERENCES
    lines.append(f"    gold: {shown or '(no valid translation)'}" + (f" | ... {more} more" if more > 0 else ""))
    return "\n".join(lines)
