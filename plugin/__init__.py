"""fairseq ``--user-dir`` for a checkout: ``fairseq-train ... --user-dir plugin``.

The same as the installed user dir (``nbest-eval user-dir``): importing it registers the
``translation_nbest`` task of :mod:`nbest_eval.fairseq.task`. Where nbest_eval is not installed,
it is found beside this folder.
"""

import os
import sys

try:
    from nbest_eval.fairseq import task  # noqa: F401  (registers translation_nbest)
except ModuleNotFoundError as err:
    if err.name != "nbest_eval":
        raise
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from nbest_eval.fairseq import task  # noqa: F401
