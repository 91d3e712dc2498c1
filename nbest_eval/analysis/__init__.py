"""Analysis on top of the metric core: tables of systems' scores (:mod:`.systems`), how measures
agree on system rankings (:mod:`.agreement`) and ``compare``'s result (:mod:`.comparison`), the
recall-precision pictures (:mod:`.recall_precision`), the gold-completeness ablation
(:mod:`.ablation`), synthetic data (:mod:`.synth`), how results write numbers (:mod:`.text`) and
figures (:mod:`.plots`, matplotlib). Checkpoint selection is :mod:`nbest_eval.selection`'s."""
