"""Output safety, for everything that writes: nothing the user has is replaced unless asked, and
no reader ever sees half a file.

Files are written to a temporary file in the target's folder and then renamed (or hard-linked,
when an existing file must not be replaced) into place, so a failed write leaves nothing behind.
"""

from __future__ import annotations

import os
import tempfile
from typing import Iterable, Mapping, Optional, Sequence, Union

from .data import InputError

PathLike = Union[str, "os.PathLike[str]"]


def check_writable(paths: Iterable[Optional[PathLike]], overwrite: bool) -> None:
    """Refuse existing outputs before any work is done (None entries are skipped)."""
    if not overwrite:
        for path in paths:
            if path is not None and os.path.lexists(path):
                raise InputError("already exists; refusing to overwrite it (use --force)", os.fspath(path))


def check_outputs(outputs: Mapping[str, Optional[PathLike]], inputs: Iterable[Optional[PathLike]],
                  force: bool) -> None:
    """Before any work, refuse every output that cannot be written: an existing file (unless
    ``force``), a missing or unwritable folder, two options naming one file, or a file that is also
    an input (compared by identity, not by name, and refused even with ``force``). ``outputs`` maps
    each output's option (``--per-prompt``) to its path (None: not asked for); ``-`` is stdout."""
    seen: dict = {}
    input_ids = {_identity(p) for p in inputs if p is not None and os.fspath(p) != "-"} - {None}
    for option, path in outputs.items():
        if path is None or os.fspath(path) == "-":
            continue
        name = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(name))
        if not os.path.isdir(folder):
            raise InputError(f"{option}: its folder {folder} does not exist", name)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"{option}: its folder {folder} is not writable", name)
        key = _identity(name) or os.path.realpath(name)
        if key in seen:
            raise InputError(f"{option} and {seen[key]} name the same file", name)
        seen[key] = option
        if _identity(name) in input_ids:
            raise InputError(f"{option} is also an input of this command; refusing to overwrite it, even with --force",
                             name)
        if os.path.lexists(name) and not force:
            raise InputError(f"{option}: already exists; refusing to overwrite it (use --force)", name)


def _identity(path: PathLike):
    """(device, inode) of an existing file (links followed), None otherwise."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def unused_stem(base: str, suffixes: Sequence[str], separator: str) -> str:
    """``base``, or ``base{separator}2``, ``...3``, ...: the first stem with no file for any suffix,
    so that writers that must not overwrite still find a name."""
    stem, copy = base, 1
    while any(os.path.lexists(stem + suffix) for suffix in suffixes):
        copy += 1
        stem = f"{base}{separator}{copy}"
    return stem


def write_text(path: PathLike, text: str, overwrite: bool = False) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) all or nothing; an existing file is refused unless
    ``overwrite`` (also when it appears while writing)."""
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    try:
        fd, partial = tempfile.mkstemp(prefix=f".{os.path.basename(name)}.", suffix=".partial", dir=folder)
    except OSError as err:
        raise InputError(f"cannot write in its folder: {err.strerror}", name) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
        os.chmod(partial, 0o666 & ~_umask())
        if overwrite:
            os.replace(partial, name)
        else:
            _link_new(partial, name)
    except FileExistsError:
        raise InputError("already exists; refusing to overwrite it (use --force)", name) from None
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror}", name) from None
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)


def write_files(texts: Mapping[PathLike, str], overwrite: bool = False) -> None:
    """Write several files; unless ``overwrite``, any existing one is refused before anything is written."""
    check_writable(texts, overwrite)
    for path, text in texts.items():
        write_text(path, text, overwrite)


def _link_new(partial: str, path: str) -> None:
    """Put ``partial`` at ``path`` only if nothing is there (atomically where hard links work)."""
    try:
        os.link(partial, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system: exclusive create, then copy
        with open(path, "x", encoding="utf-8", newline="\n") as out, open(partial, encoding="utf-8") as src:
            out.write(src.read())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
