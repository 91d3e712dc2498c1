"""``--nbest-print-samples N``: a few n-best lists in the training log at every validation, as
fairseq's ``--eval-bleu-print-samples`` prints hypotheses, so that one sees what the numbers score.

The lists are the first N that the validation decodes (fairseq's valid batches come in a fixed order,
so they are the same prompts at every validation); worker 0 logs them after the validation, each as
the prompt and its hypotheses (rank, score, a ``+`` where the hypothesis is a gold translation as the
metrics match them, text).
"""

import logging
from typing import Dict, List

from ..data import Gold, Hyp, NBest
from ..prompt import PromptGold, norm

logger = logging.getLogger(__name__)


class Samples:
    """The first ``n`` n-best lists of a validation, logged and forgotten by :meth:`log`."""

    def __init__(self, n: int):
        self.n = n
        self.lists: Dict[str, List[Hyp]] = {}

    def take(self, nbest: NBest) -> None:
        """Keep lists of a valid step until ``n`` are kept."""
        for prompt, hyps in nbest.items():
            if len(self.lists) >= self.n:
                return
            self.lists.setdefault(prompt, hyps)

    def log(self, gold: Gold, when: str, show: bool = True) -> None:
        """Log the kept lists (``gold``: their prompts; ``when``: which validation; ``show``: False on
        the other workers) and forget them."""
        for number, (prompt, hyps) in enumerate(self.lists.items() if show else (), 1):
            logger.info(f"translation_nbest: sample {number} of {len(self.lists)} ({when}; + a gold translation)\n"
                        + format_list(gold[prompt], hyps))
        self.lists = {}


def format_list(prompt, hyps: List[Hyp]) -> str:
    """A prompt (a :class:`~nbest_eval.data.GoldPrompt`) and its hypotheses, one a line."""
    valid = PromptGold(prompt).weights
    lines = [f"  {prompt.id}: {prompt.text}"]
    lines += [f"  {rank:>3} {hyp.score:9.4f} {'+' if norm(hyp.text) in valid else ' '} {hyp.text}"
              for rank, hyp in enumerate(hyps, 1)]
    return "\n".join(lines)
