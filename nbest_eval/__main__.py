"""``python -m nbest_eval``: the ``nbest-eval`` command line."""

import sys

from .cli import main

sys.exit(main())
