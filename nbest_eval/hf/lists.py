"""Each evaluation's n-best lists in a ``save_dir``, as :class:`~nbest_eval.hf.callback.NBestEvalCallback`
saves them in the loop and the async sidecar (:mod:`.async_eval`) saves them off it: one writer, so
the two modes leave the same files."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

from ..data import Gold, InputError
from ..files.output import PathLike, make_folder, write_text
from ..formats import save_nbest
from ..formats.staple import format_gold

logger = logging.getLogger(__name__)


class ListSaver:
    """Saves ``nbest-step{step}.{ext}`` (``{name}-nbest-step...``) into ``save_dir`` in ``save_format``,
    with the prompts' ``gold`` beside them once a run when they are not the whole ``full_gold``."""

    def __init__(self, save_dir: PathLike, save_format: str, name: Optional[str], gold: Gold, full_gold: Gold):
        self.save_dir, self.save_format, self.name = Path(save_dir), save_format, name
        self.gold, self.full_gold = gold, full_gold
        self._gold_saved = False

    def save(self, nbest: Any, step: int) -> Optional[Path]:
        """Write the lists (with their prompts' gold, see :meth:`_save_gold`); None where they could not
        be. Saving never stops training: what stops it (a full disk, a folder gone) is a warning."""
        stem = f"nbest-step{step}" if not self.name else f"{self.name}-nbest-step{step}"
        try:
            make_folder(self.save_dir)
            self._save_gold()
            path = self._save_lists(nbest, stem, step)
        except (InputError, OSError) as err:
            logger.warning("n-best lists of step %d not saved: %s; training goes on", step, err)
            return None
        logger.info("n-best lists of step %d written to %s", step, path)
        return path

    def _save_lists(self, nbest: Any, stem: str, step: int) -> Path:
        """The lists saved in ``save_format``, else as tsv, which holds any score (JSON has no -inf).
        Where tsv fails too (a full disk), the error names both, the file asked for first."""
        try:
            return save_nbest(nbest, self.save_dir, stem, self.save_format, self.gold)
        except InputError as err:
            if self.save_format == "tsv":
                raise
            try:
                path = save_nbest(nbest, self.save_dir, stem, "tsv", self.gold)
            except InputError as tsv_err:
                raise InputError(f"{err}; as tsv: {tsv_err}") from None
            logger.warning("n-best lists of step %d saved as tsv instead of %s: %s", step, self.save_format, err)
            return path

    def _save_gold(self) -> None:
        """Once a run, when the prompts are not the whole gold, their gold beside the lists (what
        ``nbest-eval score`` needs to score them): ``gold.txt``, or where a file of that name holds
        another gold (a run resumed with other prompts), ``gold-2.txt``... (said in a warning)."""
        if self._gold_saved or len(self.gold) == len(self.full_gold):
            return
        base = os.path.join(self.save_dir, f"{self.name}-gold" if self.name else "gold")
        text, path, copy = format_gold(self.gold, f"{base}.txt"), f"{base}.txt", 1
        while os.path.lexists(path) and _text_of(path) != text:
            copy += 1
            path = f"{base}-{copy}.txt"
        if not os.path.lexists(path):
            write_text(path, text)
        if copy > 1:
            logger.warning("%s.txt is the gold of other prompts (an earlier run's): the gold of this run's n-best "
                           "lists is %s", base, path)
        self._gold_saved = True


def _text_of(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return None
