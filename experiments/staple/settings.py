"""What every part of the STAPLE en->pt experiment shares: the release's file names, the measures,
the replayed patiences, and the fairseq configuration that the Hugging Face twin reads too."""

import os
import shlex
from pathlib import Path
from typing import Dict

REPO = Path(__file__).resolve().parents[2]
#: the fairseq model and training recipe (the Hugging Face ``--hf-recipe fairseq`` reads it too)
FAIRSEQ_CONFIG = REPO / "configs" / "staple_transformer.args"
DEFAULT_DATA = Path(os.environ.get("NBEST_EVAL_STAPLE_DIR", REPO.parent / "shared" / "data" / "staple" / "en_pt"))
DEV_GOLD, DEV_AWS = "dev.en_pt.2020-02-20.gold.txt", "dev.en_pt.aws_baseline.pred.txt"
TRAIN_TOP, TRAIN_AWS = "train.en_pt.top_translation.txt", "train.en_pt.aws_baseline.pred.txt"
METRICS = ("map", "bleu_1x1", "bleu_100x100", "wf1", "p1")
#: the scorer options of STAPLE's official scorer, for what is compared with its numbers (the AWS
#: baseline): it leaves a prompt with no valid translation out of the weighted-F1 average
OFFICIAL = {"wf1_nil": "skip"}
#: the measures a checkpoint can be selected by, and whether higher is better
SELECTION = {"map": True, "bleu_1x1": True, "bleu_100x100": True, "wf1": True, "loss": False}
PATIENCE = (3, 5, 10)
HF_RECIPES = ("fairseq", "t5")
#: --nbest-mode: validation in the training loop, handed to a sidecar, or none (the wall-time baseline)
NBEST_MODES = ("loop", "async", "off")
DEFAULT_EPOCHS = {"fairseq": 60, "hf": 30}
#: fairseq's validation batches on a GPU (--max-tokens-valid): the 500 dev prompts in a batch or two, where
#: the configuration's --max-tokens (fairseq's default for them, kept on the CPU) makes several small ones
CUDA_MAX_TOKENS_VALID = 16000
SPECIALS = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}  # the Hugging Face example's ids
SPLIT_SIZES = {"train": (None, None), "dev": (400, 100)}  # (training, validation prompts); None: all


def fairseq_config() -> Dict[str, str]:
    """configs/staple_transformer.args as {option: value} (a flag's value: "")."""
    words = shlex.split(FAIRSEQ_CONFIG.read_text(), comments=True)
    options: Dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            following = words[i + 1] if i + 1 < len(words) else "--"
            options[word] = "" if following.startswith("--") else following
    return options
