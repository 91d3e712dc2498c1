"""The experiments' code: the STAPLE en->pt runs (:mod:`experiments.staple`), the Hugging Face
demos' building blocks (:mod:`experiments.hf_toy`, :mod:`experiments.hf_models`), the benchmarks and
the replays behind the scripts in ``scripts/``.

Not installed with nbest_eval (setup.py ships ``nbest_eval`` only): it is imported from a checkout,
where the repository root is on ``sys.path``: the scripts run as ``python -m scripts.NAME`` from the
root, and pytest puts the root there through the root ``conftest.py``.
"""
