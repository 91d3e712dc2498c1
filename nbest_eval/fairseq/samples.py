"""``--nbest-print-samples N``: a few n-best lists in the training log at every validation, as
fairseq's ``--eval-bleu-print-samples`` prints hypotheses, so that one sees what the numbers score.

The lists are the first N that the validation decodes (fairseq's valid batches come in a fixed order,
so they are the same prompts at every validation); worker 0 logs them after the validation, as the
Hugging Face callback prints them (:mod:`nbest_eval.training.samples`).
"""

import logging
from typing import Dict, List

from ..data import Gold, Hyp, NBest
from ..training.samples import samples_text

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
        """Log the kept lists (``gold``: the validated prompts; ``when``: which validation; ``show``:
        False on the other workers) and forget them."""
        if show and self.lists:
            prompts = [gold[prompt] for prompt in self.lists]
            logger.info("translation_nbest: " + samples_text(when, prompts, list(self.lists.values()), len(gold)))
        self.lists = {}
