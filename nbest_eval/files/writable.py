"""May this path be written? Every rule that decides it, each in one place, checked before any work
is done (what can change meanwhile, again by :mod:`nbest_eval.files.output` as it writes), so that
nothing the user has is lost:

- a file is written only in an existing, writable folder, never over a directory, a device or a
  pipe, never by two outputs of one run, never over an input (not even when asked to overwrite: the
  input would be lost), and over an existing file only when asked (:func:`check_outputs`);
- a model directory is never an input, inside one or holding one, nor holds another output, and it
  replaces only a model directory, and only when asked (:func:`check_model_directory`);
- a link replaces only a link, and only when asked (:func:`check_link`);
- a folder for outputs is made only where one can be (:func:`check_can_make_folder`), and a folder
  that holds files is written into only when asked (:func:`check_empty_folder`).

A refusal is a :class:`Refused` that names the path, its role (the caller's name for the output: "the
averaged checkpoint", or a command line's option) and what is wrong, but no way of asking to
overwrite: that is the caller's (``overwrite=True``, ``--force``), so a command line adds it.
"""

from __future__ import annotations

import os
from typing import Collection, Dict, Iterable, Mapping, Optional, Set, Tuple, Union

from ..data import InputError

PathLike = Union[str, "os.PathLike[str]"]
Identity = Tuple[int, int]
#: the file that makes a folder a model directory (``save_pretrained`` writes it)
MODEL_CONFIG = "config.json"


class Refused(InputError):
    """``path`` may not be written: ``reason`` says why. ``overwrite_lifts``: True when asking to
    overwrite lifts the refusal, False when not even that does (the write would lose what the user
    has), None when overwriting is not the point. The message adds only, for False, that asking would
    not help, in words that name no option: a command line says how its users ask."""

    def __init__(self, path: PathLike, reason: str, overwrite_lifts: Optional[bool] = None):
        self.reason, self.overwrite_lifts = reason, overwrite_lifts
        super().__init__(reason + (", even if asked to" if overwrite_lifts is False else ""), os.fspath(path))


def check_outputs(outputs: Mapping[str, Optional[PathLike]], inputs: Iterable[Optional[PathLike]],
                  overwrite: bool, updated: Collection[str] = (), figures: Collection[str] = ()) -> None:
    """Refuse every file output that could not be written at the end: in a missing or unwritable
    folder, named by two outputs, an input (compared by identity, not by name), a directory, a device
    or a pipe, or an existing file unless ``overwrite``.

    ``outputs`` maps each output's role to its path (None: not asked for; ``-``: standard output).
    Roles in ``updated`` name files updated in place (a cache): an existing one is expected. Roles in
    ``figures`` are images, which standard output does not take (a file named ``-`` would be written).
    """
    input_ids = _identities(inputs)
    seen: Dict = {}
    for role, path in outputs.items():
        if path is not None and os.fspath(path) == "-" and role in figures:
            raise InputError(f"{role}: a figure needs a file name, not - (standard output)")
        if path is None or os.fspath(path) == "-":
            continue
        _check_folder_of(role, path)
        # what a write replaces is the directory entry itself (a link is replaced, not followed)
        key = file_identity(path, follow=False) or entry_path(path)
        if key in seen:
            raise Refused(path, f"{role} and {seen[key]} name the same file")
        seen[key] = role
        if key in input_ids:
            raise Refused(path, f"{role} is also an input; refusing to overwrite it", overwrite_lifts=False)
        _check_regular_file(role, path)
        if role not in updated:
            check_new(role, path, overwrite)


def check_new(role: Optional[str], path: PathLike, overwrite: bool) -> None:
    """Refuse an existing ``path`` (a dangling link too) unless ``overwrite``."""
    if not overwrite and os.path.lexists(path):
        raise already_exists(role, path)


def already_exists(role: Optional[str], path: PathLike) -> Refused:
    """The refusal of an existing ``path``, found before writing or while putting the output in place."""
    written_as = f" with {role}" if role else ""
    return Refused(path, f"already exists; refusing to overwrite it{written_as}", overwrite_lifts=True)


def check_model_directory(role: str, path: PathLike, inputs: Iterable[PathLike], overwrite: bool,
                          outputs: Mapping[str, Optional[PathLike]] = {}) -> None:
    """Refuse a model directory output (written whole, replacing what is there) that would lose data:
    one in a missing or unwritable folder, an input, inside one or holding one, one holding another of
    the run's ``outputs`` (role -> path), an existing one unless ``overwrite``, and even then one that
    is not a model directory (no :data:`MODEL_CONFIG`): another directory of the user's."""
    name = os.fspath(path)
    _check_folder_of(role, name)
    real = os.path.realpath(name)
    for other in inputs:
        other_real = os.path.realpath(os.fspath(other))
        if _within(real, other_real) or _within(other_real, real):
            raise Refused(name, f"{role} is an input, inside one or holds one ({os.fspath(other)}); refusing to "
                                f"write there", overwrite_lifts=False)
    for other_role, other in outputs.items():
        if other and _within(entry_path(other), real):
            raise Refused(name, f"{role} would replace {other_role}'s file {os.fspath(other)}; refusing to write "
                                f"there", overwrite_lifts=False)
    if not os.path.lexists(name):
        return
    check_new(role, name, overwrite)
    if os.path.islink(name) or not os.path.isfile(os.path.join(name, MODEL_CONFIG)):
        raise Refused(name, f"{role}: exists and is not a model directory (no {MODEL_CONFIG}); refusing to "
                            f"replace it", overwrite_lifts=False)


def check_link(role: Optional[str], path: PathLike, overwrite: bool) -> None:
    """Refuse to make a link where something other than a link is (a file or folder of the user's,
    even if asked to overwrite), and over an existing link unless ``overwrite``."""
    if os.path.lexists(path) and not os.path.islink(path):
        raise Refused(path, f"{_of(role)}exists and is not a link; refusing to replace it", overwrite_lifts=False)
    check_new(role, path, overwrite)


def check_can_make_folder(role: Optional[str], path: PathLike) -> None:
    """Refuse a folder for outputs that could not be made or written in: the name, or the nearest of
    its parents that exists, is not a folder (a file, a dangling link) or not writable."""
    name = os.fspath(path)
    existing = os.path.abspath(name)
    while not os.path.lexists(existing):  # the root always exists
        existing = os.path.dirname(existing)
    what = "exists and" if existing == os.path.abspath(name) else f"cannot be created: {existing}"
    if not os.path.isdir(existing):
        raise Refused(name, f"{_of(role)}{what} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise Refused(name, f"{_of(role)}{what} is not writable")


def check_empty_folder(role: str, path: PathLike, overwrite: bool) -> None:
    """Refuse a folder that cannot be made (:func:`check_can_make_folder`), and one that holds files
    unless ``overwrite``: the files written would replace those of the same names."""
    check_can_make_folder(role, path)
    if overwrite or not os.path.isdir(path):
        return
    try:
        with os.scandir(path) as entries:
            empty = next(entries, None) is None
    except OSError as err:
        raise Refused(path, f"{role}: cannot list it: {err.strerror}") from None
    if not empty:
        raise Refused(path, f"{role}: is not empty; refusing to write into it", overwrite_lifts=True)


def _identities(paths: Iterable[Optional[PathLike]]) -> Set[Identity]:
    """Every identity of the existing ``paths`` (``-`` and None skipped): a link's own and its file's,
    so that an output is found to be an input however either is named."""
    named = [p for p in paths if p is not None and os.fspath(p) != "-"]
    return {file_identity(p, follow) for p in named for follow in (True, False)} - {None}


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


def _check_folder_of(role: str, path: PathLike) -> None:
    """Refuse an output whose folder is missing or not writable."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise Refused(path, f"{role}: its folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Refused(path, f"{role}: its folder {folder} is not writable")


def _check_regular_file(role: str, path: PathLike) -> None:
    """Refuse a file output where a directory, a device or a pipe is: it could not be replaced by a file."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise Refused(path, f"{role}: is a directory; give a file name")
    if os.path.exists(path) and not os.path.isfile(path):
        raise Refused(path, f"{role}: is not a regular file (a device or a pipe); for standard output give -")


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _of(role: Optional[str]) -> str:
    return f"{role}: " if role else ""
