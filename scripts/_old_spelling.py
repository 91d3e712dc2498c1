"""``python scripts/NAME.py``, the spelling before ``python -m scripts.NAME``, kept for one release.

Run as a file, a script has its own folder on ``sys.path``, not the repository root, so it cannot
import :mod:`experiments`; it runs itself again as ``python -m scripts.NAME`` with the root on
``PYTHONPATH``, the working directory and the arguments unchanged."""

import os
import sys
from pathlib import Path


def rerun_as_module(script: str) -> None:
    """Replace this process with ``python -m scripts.NAME ARGS`` (``script``: the file's path)."""
    path = Path(script).resolve()
    root = str(path.parent.parent)
    print(f"note: `python scripts/{path.name}` goes in the next release; run `python -m scripts.{path.stem}` "
          "from the repository root", file=sys.stderr)
    pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    os.execve(sys.executable, [sys.executable, "-m", f"scripts.{path.stem}", *sys.argv[1:]],
              {**os.environ, "PYTHONPATH": pythonpath})
