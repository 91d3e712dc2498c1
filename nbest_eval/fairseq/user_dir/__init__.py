"""Holds the fairseq ``--user-dir`` package :mod:`nbest_eval_fairseq`, alone in its folder: fairseq
puts the folder above a user dir on ``sys.path``, so nothing else may live there."""
