"""fairseq adapter: the ``translation_nbest`` task and everything around it.

- :mod:`.task`: the task (n-best validation inside ``valid_step``, additive statistics in the
  logging outputs, metrics derived in ``reduce_metrics``);
- :mod:`.startup`: the run's options checked before the first epoch (did you mean, direction, lengths);
- :mod:`.generation`: batched beam n-best generation and its text post-processing;
- :mod:`.samples`: ``--nbest-print-samples``, a few n-best lists in the log at each validation;
- :mod:`.early_stopping`: the early-stopping rule carried out by fairseq's loop, its state across restarts;
- :mod:`.checkpoints`: saved checkpoints, loaded safely and scored as validation scored them;
- :mod:`.safe_load`: the allowlist that lets torch's safe loader read fairseq checkpoints;
- :mod:`.averaging`: the average of several checkpoints, as fairseq's average_checkpoints.py makes it;
- :mod:`.command_line`: a ``fairseq-train`` command line without n-best validation (a wall-time baseline);
- :data:`USER_DIR`: the ``--user-dir`` that registers the task (``nbest-eval user-dir`` prints it).

Importing this package does not import fairseq; its modules do.
"""

import os

#: the installed fairseq ``--user-dir``: a uniquely named package, since fairseq imports a user dir
#: as a top-level module named after its folder
USER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "user_dir", "nbest_eval_fairseq")
