"""STAPLE en->pt, trained and validated end to end (``python -m scripts.staple_en_pt``), one module
a job: :mod:`.data` (the corpus), :mod:`.fairseq_run` and :mod:`.hf_run` (training), :mod:`.summary`
(the rows of summary.json), :mod:`.scoring` (the AWS baseline), :mod:`.selection` (the analysis),
:mod:`.tables` and :mod:`.plots` (the report), :mod:`.cli` (the command)."""
