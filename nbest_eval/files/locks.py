"""Advisory file locks (``flock``): the kernel drops them when their holder dies, SIGKILL included,
so a lock can never be left stale by a crashed process (unlike a lock *file* whose existence is the lock)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Iterator, Optional


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive lock on the file ``path`` (created if needed) while the block runs; waits for it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def try_lock(path: str) -> Optional[int]:
    """The open descriptor of ``path`` (created if needed) holding an exclusive lock, or None at once
    if another open file holds it. Closing the descriptor (or dying) releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd
