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
from ..training import samples

logger = logging.getLogger(__name__)


def say(state: Any, text: str) -> None:
    """Print ``text`` on the main process's console (see the module docstring) and log it at INFO."""
    logger.info(text)
    if getattr(state, "is_world_process_zero", True):
        tqdm.write(text)


def samples_text(step: int, prompts: Sequence[GoldPrompt], lists: Sequence[Sequence[Hyp]], of: int) -> str:
    """Some prompts' n-best lists at ``step`` (:mod:`nbest_eval.training.samples`, as fairseq's are logged)."""
    return samples.samples_text(f"step {step}", prompts, lists, of)
