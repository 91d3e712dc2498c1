#!/usr/bin/env python
"""The GPU check (docs/gpu.md): the command of :mod:`experiments.gpu_check`.

    python -m scripts.gpu_check --data .gpu-data/en_pt --out OUT [--budget 450] [--smoke]
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/gpu_check.py``: the spelling of the other scripts
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.gpu_check import main

    sys.exit(main())
