"""fairseq command lines for the scripts: a fairseq command run by this Python (:func:`fairseq_command`),
and ``fairseq-train`` words without n-best validation: the same run as plain ``translation``, the
baseline that ``--nbest-mode loop`` and ``async`` are timed against (``examples/fairseq_demo.py`` and
``scripts/staple_en_pt.py --nbest-mode off``). Imports no fairseq."""

import sys
from pathlib import Path
from typing import List, Sequence

#: fairseq's console scripts, as modules of its ``fairseq_cli`` package
MODULES = {"fairseq-train": "fairseq_cli.train", "fairseq-preprocess": "fairseq_cli.preprocess",
           "fairseq-generate": "fairseq_cli.generate", "fairseq-hydra-train": "fairseq_cli.hydra_train"}

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


def fairseq_command(name: str) -> List[str]:
    """The command that runs fairseq's ``name`` (``fairseq-train``...) with the fairseq this Python
    imports: the console script beside the interpreter, else ``python -m fairseq_cli.train`` (an
    install with ``pip --target`` puts the scripts in a folder of its own, maybe not on PATH)."""
    script = Path(sys.executable).with_name(name)
    return [str(script)] if script.exists() else [sys.executable, "-m", MODULES[name]]
