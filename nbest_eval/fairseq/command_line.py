"""``fairseq-train`` words without n-best validation: the same run as plain ``translation``, the
baseline that ``--nbest-mode loop`` and ``async`` are timed against (``examples/fairseq_demo.py`` and
``scripts/staple_en_pt.py --nbest-mode off``). Imports no fairseq."""

from typing import List, Sequence

#: fairseq's own options that name an n-best measure, left out with the plugin's
BEST_METRIC = ("--best-checkpoint-metric", "--maximize-best-checkpoint-metric")


def plain_translation(words: Sequence[str]) -> List[str]:
    """``words`` with every ``--nbest-*`` option and the best-checkpoint metric (with their values) left
    out, and ``--task translation_nbest`` made ``--task translation``: fairseq keeps the checkpoint
    with the lowest loss."""
    kept: List[str] = []
    dropping = False
    for word in words:
        if word.startswith("--"):
            dropping = word.startswith("--nbest-") or word in BEST_METRIC
        if not dropping:
            kept.append("translation" if kept and kept[-1] == "--task" and word == "translation_nbest" else word)
    return kept
