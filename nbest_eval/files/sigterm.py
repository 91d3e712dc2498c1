"""Being stopped cleanly: SIGTERM as an exception where clean-up must run.

By default SIGTERM ends a Python process at once, with no ``finally`` run: worker processes are
left orphaned, half-written outputs are left beside their targets. Within :func:`sigterm_exits`
it raises ``SystemExit(128 + SIGTERM)`` instead (the exit status a shell reports for it), so the
clean-up runs. Ctrl-C raises KeyboardInterrupt by default already.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """Within it, SIGTERM raises SystemExit; after it, the default is back. A handler someone else
    installed (a trainer's, or SIG_IGN) is left alone, nested blocks keep the outer one's, and
    outside the main thread (the only one that may set handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)
