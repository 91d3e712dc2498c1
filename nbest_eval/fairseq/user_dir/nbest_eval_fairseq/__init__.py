"""fairseq ``--user-dir`` of nbest-eval: registers the ``translation_nbest`` task.

    fairseq-train DATA --user-dir "$(nbest-eval user-dir)" --task translation_nbest --nbest-gold G ...
"""

from nbest_eval.fairseq import task  # noqa: F401  (registers translation_nbest)
