"""fairseq ``--user-dir`` for nbest-eval: registers the ``translation_nbest`` task.

    fairseq-train DATA --user-dir plugin --task translation_nbest --nbest-gold valid.gold.txt ...

The implementation lives in :mod:`nbest_eval.fairseq_task`; this package only imports it, so the
task is registered once however it is reached (``--user-dir plugin`` or ``import
nbest_eval.fairseq_task``). Importing it also sets ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (unless
already set) before fairseq loads any checkpoint: torch >= 2.6 refuses fairseq checkpoints otherwise.
"""

import os
import sys

if not os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD"):
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

try:
    import nbest_eval  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`: nbest_eval sits next to this directory
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nbest_eval.fairseq_task  # noqa: F401,E402  (registers translation_nbest)
