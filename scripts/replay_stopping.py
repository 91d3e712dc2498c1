#!/usr/bin/env python
"""Every early-stopping rule replayed on a run's saved n-best lists: the command of :mod:`experiments.replay_stopping`.

    python -m scripts.replay_stopping --gold RUN/nbest/valid.gold.txt RUN/nbest --markdown
"""

import sys

if __name__ == "__main__":
    if __spec__ is None:  # run as a file, ``python scripts/replay_stopping.py``: the old spelling, for one release
        import _old_spelling

        _old_spelling.rerun_as_module(__file__)
    from experiments.replay_stopping import main

    sys.exit(main())
