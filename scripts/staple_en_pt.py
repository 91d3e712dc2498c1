#!/usr/bin/env python
"""STAPLE en->pt, trained and validated end to end: the command of :mod:`experiments.staple.cli`.

    python -m scripts.staple_en_pt --out ../runs/staple-fairseq --framework fairseq   # or --framework hf; --analyse
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/staple_en_pt.py``: the old spelling, for one release
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.staple.cli import main

    sys.exit(main())
