"""The ``--nbest-save-dir`` folder: the scored prompts' gold (``{subset}.gold.txt``) beside the
n-best lists saved at each validation, so that the lists stay re-scorable offline."""

import logging
import os
from typing import Any, Dict

from ..data import Gold, InputError, NBest
from ..files.output import check_can_make_folder, make_folder, write_text
from ..formats import save_nbest
from ..formats.staple import format_gold

logger = logging.getLogger(__name__)


def gold_path(save_dir: str, subset: str) -> str:
    return os.path.join(save_dir, f"{subset}.gold.txt")


def prepare(save_dir: str, subset: str, gold: Gold, write: bool) -> None:
    """Check that the folder can hold the lists and that a gold already there is ``gold``; write it
    where ``write`` (rank 0) and none is there yet. InputError says what is wrong."""
    path = gold_path(save_dir, subset)
    text = format_gold(gold, path)
    check_can_make_folder("--nbest-save-dir", save_dir)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            if file.read() != text:
                raise InputError(f"{path} holds a different gold (other --nbest-gold or --nbest-max-prompts?); "
                                 f"give another --nbest-save-dir")
        return
    if write:
        make_folder(save_dir)
        write_text(path, text)


def rewrite_gold(save_dir: str, subset: str, gold: Gold) -> None:
    """Write the gold again where it is gone (the folder was removed mid-run): lists saved without
    it could not be re-scored. OSError/InputError where it cannot be written."""
    path = gold_path(save_dir, subset)
    if not os.path.exists(path):
        make_folder(save_dir)
        write_text(path, format_gold(gold, path))
        logger.warning(f"translation_nbest: {path} was gone (--nbest-save-dir removed during training?); "
                       f"wrote it again")


def save_validation(save_dir: str, subset: str, gold: Gold, nbest: NBest, epoch: int, updates: int,
                    values: Dict[str, float], **extra: Any) -> str:
    """Save one validation's lists, in gold order, as ``{subset}.epoch{E}.update{U}.tsv`` with its record
    (``.json``: epoch, updates, the values at full precision, ``extra``), never overwriting; the path
    written. The training task and the async sidecar both save through here, so their files are equal."""
    nbest = {pid: nbest[pid] for pid in gold.ids() if pid in nbest}
    record = {"epoch": epoch, "num_updates": updates, "subset": subset,
              "gold": os.path.basename(gold_path(save_dir, subset)), "n_prompts": len(nbest), **values, **extra}
    rewrite_gold(save_dir, subset, gold)
    return str(save_nbest(nbest, save_dir, f"{subset}.epoch{epoch}.update{updates}", "tsv", record=record))
