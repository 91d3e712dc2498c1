#!/usr/bin/env python
"""Benchmarks of the metric core (BENCHMARKS.md): the command of :mod:`experiments.bench`.

    python -m scripts.bench [--gold PATH] [--only significance]
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/bench.py``: the old spelling, for one release
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.bench import main

    sys.exit(main())
