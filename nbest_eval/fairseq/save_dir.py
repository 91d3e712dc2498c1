"""The ``--nbest-save-dir`` folder: the scored prompts' gold (``{subset}.gold.txt``) beside the
n-best lists saved at each validation, so that the lists stay re-scorable offline."""

import logging
import os

from ..data import Gold, InputError
from ..files.output import check_can_make_folder, make_folder, write_text
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
