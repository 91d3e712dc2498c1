"""What the callbacks tell the user on the console: decisions and samples, seen at default logging.

transformers' default verbosity is WARNING, so Python logging at INFO is invisible, and a warning
marks a problem, which a stopping decision is not. The Trainer prints each evaluation's metrics to
standard output itself, whatever the verbosity (the ``PrinterCallback``'s ``print``, or the
``ProgressCallback``'s ``tqdm.write``, which keeps the progress bar whole). :func:`say` writes the
same way, with ``tqdm.write`` (a plain print when no bar is shown), from the first process only as
the Trainer does, so that a verdict follows the metrics line it is about; it also logs the line at
INFO, for log files.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from tqdm.auto import tqdm

from ..data import GoldPrompt, Hyp
from ..prompt import norm

logger = logging.getLogger(__name__)
#: gold translations shown under a sample (the most frequent first)
SAMPLE_REFERENCES = 3


def say(state: Any, text: str) -> None:
    """Print ``text`` on the main process's console (see the module docstring) and log it at INFO."""
    logger.info(text)
    if getattr(state, "is_world_process_zero", True):
        tqdm.write(text)


def samples_text(step: int, prompts: Sequence[GoldPrompt], lists: Sequence[Sequence[Hyp]], of: int) -> str:
    """Some prompts' n-best lists, each hypothesis marked ``*`` when it is a valid translation, and
    the prompt's most frequent gold translations: a look at what the numbers measure."""
    lines = [f"n-best samples at step {step} ({len(prompts)} of {of} prompts; * a valid translation):"]
    for prompt, hyps in zip(prompts, lists):
        valid = {norm(text) for text, _ in prompt.translations}
        lines.append(f"  {prompt.id}: {prompt.text}")
        for rank, hyp in enumerate(hyps, 1):
            score = "" if hyp.score is None else f"  ({hyp.score:.4g})"
            lines.append(f"    {rank:>2} {'*' if norm(hyp.text) in valid else ' '} {hyp.text}{score}")
        shown = " | ".join(text for text, _ in prompt.translations[:SAMPLE_REFERENCES])
        more = len(prompt.translations) - SAMPLE_REFERENCES
        lines.append(f"    gold: {shown or '(no valid translation)'}" + (f" | ... {more} more" if more > 0 else ""))
    return "\n".join(lines)
