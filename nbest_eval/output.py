"""Output safety, for everything that writes: nothing the user has is replaced unless asked, no
input is ever an output, and no reader ever sees half a file.

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
from typing import Callable, Collection, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .data import InputError
from .sigterm import sigterm_exits

PathLike = Union[str, "os.PathLike[str]"]
Identity = Tuple[int, int]

EXISTS = "already exists; refusing to overwrite it (use --force)"


def check_writable(paths: Iterable[Optional[PathLike]], overwrite: bool) -> None:
    """Refuse existing outputs before any work is done (None entries are skipped)."""
    if not overwrite:
        for path in paths:
            if path is not None and os.path.lexists(path):
                raise InputError(EXISTS, os.fspath(path))


def check_outputs(outputs: Mapping[str, Optional[PathLike]], inputs: Iterable[Optional[PathLike]],
                  force: bool, updated: Collection[str] = ()) -> None:
    """Before any work, refuse every output that could not be written at the end: an existing file
    (unless ``force``), a directory, a missing or unwritable folder, two options naming one file,
    or a file that is also an input (compared by identity, not by name, and refused even with
    ``force``: replacing it would lose the input).

    ``outputs`` maps each output's option (``--per-prompt``) to its path (None: not asked for; ``-``:
    stdout). Options in ``updated`` name files that are updated in place (a cache): an existing one
    is expected.
    """
    inputs = [os.fspath(p) for p in inputs if p is not None and os.fspath(p) != "-"]
    input_ids = {file_identity(p, follow) for p in inputs for follow in (True, False)} - {None}
    seen: dict = {}
    for option, path in outputs.items():
        if path is None or os.fspath(path) == "-":
            continue
        name = os.fspath(path)
        check_folder(option, name)
        # what a write replaces is the directory entry itself (a link is replaced, not followed)
        key = file_identity(name, follow=False) or entry_path(name)
        if key in seen:
            raise InputError(f"{option} and {seen[key]} name the same file", name)
        seen[key] = option
        if key in input_ids:
            raise InputError(f"{option} is also an input of this command; refusing to overwrite it, even with --force",
                             name)
        if os.path.isdir(name) and not os.path.islink(name):
            raise InputError(f"{option}: is a directory; give a file name", name)
        if os.path.exists(name) and not os.path.isfile(name):
            raise InputError(f"{option}: is not a regular file (a device or a pipe); for standard output give -",
                             name)
        if os.path.lexists(name) and not force and option not in updated:
            raise InputError(f"already exists; refusing to overwrite it with {option} (use --force)", name)


def make_folder(path: PathLike) -> None:
    """Create a folder for outputs (and its parents) if needed; what stops it is an error naming it."""
    name = os.fspath(path)
    if os.path.exists(name) and not os.path.isdir(name):
        raise InputError("exists and is not a folder", name)
    try:
        os.makedirs(name, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create this folder: {err.strerror}", err.filename or name) from None


def check_can_make_folder(option: str, path: PathLike) -> None:
    """Refuse, before any work, a folder for outputs that :func:`make_folder` could not make or write
    in later: the name, or the nearest of its parents that exists, is not a folder (a file, a
    dangling link) or not writable."""
    name = os.fspath(path)
    existing = os.path.abspath(name)
    while not os.path.lexists(existing):  # the root always exists
        existing = os.path.dirname(existing)
    what = "exists and" if existing == os.path.abspath(name) else f"cannot be created: {existing}"
    if not os.path.isdir(existing):
        raise InputError(f"{option}: {what} is not a folder", name)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{option}: {what} is not writable", name)


def check_folder(option: str, name: str) -> None:
    """Refuse an output whose folder is missing or not writable."""
    folder = os.path.dirname(os.path.abspath(name))
    if not os.path.isdir(folder):
        raise InputError(f"{option}: its folder {folder} does not exist", name)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{option}: its folder {folder} is not writable", name)


def file_identity(path: PathLike, follow: bool = True) -> Optional[Identity]:
    """(device, inode) of an existing file, None otherwise: two names of one file (links, hard
    links, other spellings) have one identity. ``follow=False``: of a link itself."""
    try:
        stat = os.stat(path, follow_symlinks=follow)
    except (OSError, ValueError):
        return None
    return stat.st_dev, stat.st_ino


def entry_path(path: PathLike) -> str:
    """The absolute name of ``path`` itself: its folder resolved, a final link not followed."""
    name = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.realpath(os.path.dirname(name)), os.path.basename(name))


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
    check_writable([path], overwrite)
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
    check_writable(texts, overwrite)
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
        raise InputError(EXISTS, item.path) from None
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
