"""Output safety, for everything that writes: no reader ever sees half a file, and nothing the user
has is replaced unless asked (whether a path may be written at all is :mod:`nbest_eval.files.writable`'s).

Every file is first written in full under a private temporary folder beside its target, then
renamed (or hard-linked, when an existing file must not be replaced) into place, so a failed write
leaves nothing behind. Inside :func:`all_or_nothing`, a command's outputs are put in place together
at the end: if any of them fails, none is left. Being stopped (SIGTERM, Ctrl-C) while writing is
such a failure too: the partial files are removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import tempfile
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..data import InputError
from .sigterm import sigterm_exits
from .writable import PathLike, already_exists, check_can_make_folder, check_new


def make_folder(path: PathLike) -> None:
    """Create a folder for outputs (and its parents) if needed; what stops it is an error naming it."""
    check_can_make_folder(None, path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create this folder: {err.strerror}", err.filename or os.fspath(path)) from None


#: a name that stays inside the folder it is given for: no separator, no leading '.' (nor '..')
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def unused_stem(base: str, suffixes: Sequence[str], separator: str) -> str:
    """``base``, or ``base{separator}2``, ``...3``, ...: the first stem with no file for any suffix,
    so that writers that must not overwrite still find a name."""
    stem, copy = base, 1
    while any(os.path.lexists(stem + suffix) for suffix in suffixes):
        copy += 1
        stem = f"{base}{separator}{copy}"
    return stem


@dataclass
class _Staged:
    """A finished output waiting in its private folder beside its target."""

    path: str
    folder: str
    overwrite: bool

    @property
    def partial(self) -> str:
        return os.path.join(self.folder, os.path.basename(self.path))


#: the outputs staged by the innermost :func:`all_or_nothing` (None: outside one)
_STAGED: ContextVar[Optional[List[_Staged]]] = ContextVar("nbest_eval_staged", default=None)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Within it, every file this module writes is written in full beside its target but put in
    place only when the block ends without an error, all together; otherwise none is, and files
    already put in place by a failed ending are removed again. Nested blocks join the outer one."""
    if _STAGED.get() is not None:
        yield
        return
    staged: List[_Staged] = []
    token = _STAGED.set(staged)
    with sigterm_exits():  # SIGTERM too ends in the finally that removes what is staged
        try:
            yield
            _place_all(staged)
        finally:
            _STAGED.reset(token)
            for item in staged:
                shutil.rmtree(item.folder, ignore_errors=True)


def write_file(path: PathLike, render: Callable[[str], None], overwrite: bool = False) -> None:
    """Put what ``render(partial)`` creates at ``partial`` (a new name in a private folder beside
    ``path``: a file, a link, a directory) at ``path``, all or nothing; an existing ``path`` is
    refused unless ``overwrite`` (also when it appears meanwhile), and then replaced whole, a directory too."""
    check_new(None, path, overwrite)
    staged = _STAGED.get()
    if staged is not None:
        staged.append(_stage(os.fspath(path), render, overwrite))
        return
    with sigterm_exits():  # SIGTERM too ends in the clean-up of the private folder
        item = _stage(os.fspath(path), render, overwrite)
        try:
            _place(item)
        finally:
            shutil.rmtree(item.folder, ignore_errors=True)


def write_text(path: PathLike, text: str, overwrite: bool = False) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) all or nothing, see :func:`write_file`; ``-`` is
    standard output (written at once, even inside :func:`all_or_nothing`)."""
    if os.fspath(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return

    def render(partial: str) -> None:
        with open(partial, "x", encoding="utf-8", newline="\n") as file:
            file.write(text)

    write_file(path, render, overwrite)


def write_files(texts: Mapping[PathLike, str], overwrite: bool = False) -> None:
    """Write several files, all or nothing; unless ``overwrite``, any existing one is refused before
    anything is written."""
    for path in texts:
        check_new(None, path, overwrite)
    with all_or_nothing():
        for path, text in texts.items():
            write_text(path, text, overwrite)


def _stage(path: str, render: Callable[[str], None], overwrite: bool) -> _Staged:
    try:
        folder = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".partial",
                                  dir=os.path.dirname(os.path.abspath(path)))
    except OSError as err:
        raise InputError(f"cannot write in its folder: {err.strerror}", path) from None
    try:
        item = _Staged(path, folder, overwrite)
        render(item.partial)
    except OSError as err:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"cannot write: {err.strerror or err}", path) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return item


def _place_all(staged: Sequence[_Staged]) -> None:
    """Place every staged output; if one fails, undo those placed before it: remove a new file, put
    back the one an ``overwrite`` replaced (kept until then in the staging folder)."""
    placed: List[Tuple[str, Optional[str]]] = []
    try:
        for item in staged:
            previous = _keep_previous(item) if item.overwrite else None
            _place(item)
            placed.append((item.path, previous))
    except InputError:
        for path, previous in reversed(placed):
            if previous is None:
                _remove(path)
            else:
                with contextlib.suppress(OSError):
                    os.replace(previous, path)
        raise


def _keep_previous(item: _Staged) -> Optional[str]:
    """A second name, in the staging folder, for the file (or link) that placing ``item`` replaces."""
    if not os.path.lexists(item.path) or (os.path.isdir(item.path) and not os.path.islink(item.path)):
        return None
    previous = item.partial + ".previous"
    try:
        os.link(item.path, previous, follow_symlinks=False)
    except OSError:  # no hard links here: a copy
        try:
            shutil.copy2(item.path, previous, follow_symlinks=False)
        except OSError as err:
            raise InputError(f"cannot keep the file it replaces until the other outputs are written: "
                             f"{err.strerror}", item.path) from None
    return previous


def _place(item: _Staged) -> None:
    try:
        if item.overwrite:
            _replace(item)
        else:
            _link_new(item.partial, item.path)
    except FileExistsError:
        raise already_exists(None, item.path) from None
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror}", item.path) from None


def _replace(item: _Staged) -> None:
    """``os.replace``, which cannot replace a (non-empty) directory: a directory output (a model
    directory) first moves the existing one into the private folder (removed with it), and moves it
    back if the new one cannot take its place. A file never replaces a directory, nor a directory a
    file. Links are replaced as files."""
    new_directory, old_directory = _is_directory(item.partial), _is_directory(item.path)
    if os.path.lexists(item.path) and new_directory != old_directory:
        raise IsADirectoryError(errno.EISDIR, "a file and a directory never replace each other")
    if not old_directory:
        os.replace(item.partial, item.path)
        return
    aside = item.partial + ".replaced"  # beside the new one, in the private folder
    os.rename(item.path, aside)
    try:
        os.rename(item.partial, item.path)
    except OSError:
        os.rename(aside, item.path)
        raise


def _is_directory(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _link_new(partial: str, path: str) -> None:
    """Put ``partial`` at ``path`` only if nothing is there (atomically where hard links work)."""
    try:
        os.link(partial, path, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (or a directory): check, then rename
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.rename(partial, path)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
