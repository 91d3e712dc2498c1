#!/usr/bin/env python
"""A tiny T5 trained on the synthetic corpus with n-best validation: the command of :mod:`experiments.train_hf`.

    python -m scripts.train_hf --output-dir runs/hf --data synth
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/train_hf.py``: the old spelling, for one release
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.train_hf import main

    sys.exit(main())
