"""The experiments' commands, run from the repository root as ``python -m scripts.NAME``: each is a
short entry point into :mod:`experiments`, which is not installed (``-m`` puts the root, and with it
``experiments``, on ``sys.path``)."""
