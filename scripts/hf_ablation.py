#!/usr/bin/env python
"""Why the first Hugging Face recipe barely learned STAPLE: the command of :mod:`experiments.hf_ablation`.

    python -m scripts.hf_ablation --run RUN --model twin --recipe fairseq --epochs 12
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/hf_ablation.py``: the old spelling, for one release
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.hf_ablation import main

    sys.exit(main())
