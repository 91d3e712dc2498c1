#!/usr/bin/env python
"""The GPU check (docs/gpu.md): the command of :mod:`experiments.gpu_check`.

    python -m scripts.gpu_check --data .gpu-data/en_pt --out OUT [--budget 450] [--smoke]
"""

import sys

if __name__ == "__main__":
    from experiments.gpu_check import main

    sys.exit(main())
