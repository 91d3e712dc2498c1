"""TensorBoard scalars from the sidecar (issue 33, ``nbest-eval watch --tensorboard-logdir DIR``): each
result's measures, lag and timings at its snapshot's update (fairseq) or step (Hugging Face), so that
the curves line up with training's own.

fairseq writes a run folder per subset (``DIR/valid``) whose tags are the valid line's keys; the
Trainer's TensorBoard callback writes ``eval/<key>``. In async mode the trainer's own valid line
carries the latest *arrived* values, so the sidecar writes to a run folder of its own beside it
(``valid_sidecar``, ``eval_sidecar``): the same tags, hence the same charts, at the updates the
measures belong to. The writer is ``torch.utils.tensorboard``'s, else tensorboardX's (as fairseq
picks), imported only when scalars are asked for: this module loads no framework itself.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ..data import InputError

#: timings that are clock readings, not durations
CLOCK = ("evaluated_at", "handed_off_at")


def summary_writer() -> type:
    """The SummaryWriter class fairseq would use; an InputError naming the option where there is none."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise InputError("--tensorboard-logdir needs TensorBoard: pip install tensorboard "
                             "(or tensorboardX)") from None
    return SummaryWriter


class Scalars:
    """Writes results to ``logdir/run``, each tag ``prefix + key``; lag and timings as ``nbest_<name>``
    (``writer``: a SummaryWriter class, :func:`summary_writer`'s by default)."""

    def __init__(self, logdir: str, run: str, prefix: str = "", writer: Any = None):
        self.prefix = prefix
        self.writer = (writer or summary_writer())(os.path.join(logdir, run))

    def write(self, result: Mapping[str, Any]) -> None:
        """One evaluated result, at its snapshot's update or step; flushed (TensorBoard shows it now)."""
        tags = result["tags"]
        step = tags.get("update", tags.get("step"))
        timings = result.get("timings") or {}
        scalars = {key: value for key, value in result["values"].items() if value is not None}
        scalars.update((key if key.startswith("nbest_") else f"nbest_{key}", value)
                       for key, value in timings.items() if key not in CLOCK and isinstance(value, (int, float)))
        for key, value in scalars.items():
            self.writer.add_scalar(self.prefix + key, float(value), step, walltime=timings.get("evaluated_at"))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
