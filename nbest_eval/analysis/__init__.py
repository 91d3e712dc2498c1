"""Analysis on top of the metric core: checkpoint selection (:mod:`.selection`), tables of systems'
scores (:mod:`.systems`), how measures agree on system rankings (:mod:`.agreement`), the
gold-completeness ablation (:mod:`.ablation`) and figures (:mod:`.plots`, matplotlib)."""
