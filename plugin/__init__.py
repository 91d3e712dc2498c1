"""fairseq ``--user-dir`` for a checkout: ``fairseq-train ... --user-dir plugin``.

It is the installed user dir (``nbest-eval user-dir``, :data:`nbest_eval.fairseq.USER_DIR`), which
registers the ``translation_nbest`` task; where nbest_eval is not installed, it is found beside
this folder.
"""

import importlib.util
import os
import sys

if importlib.util.find_spec("nbest_eval") is None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nbest_eval.fairseq.user_dir.nbest_eval_fairseq  # noqa: E402, F401  (the user dir itself)
