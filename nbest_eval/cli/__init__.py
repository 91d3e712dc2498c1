"""``nbest-eval`` command line: one sub-command per module of this package.

Each command module defines ``add_arguments(parser)``, ``run(args) -> int`` and a docstring whose
first line is its help. User errors (:class:`~nbest_eval.data.InputError`) end with a one-line
message and exit status 2, never a traceback; so do a closed output pipe (``| head``, status 1)
and Ctrl-C (status 130). A refused output (:class:`~nbest_eval.files.writable.Refused`) also says what
--force, every writing command's way of asking to overwrite, would change.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import List, Optional

import nbest_eval

from ..data import InputError
from ..files.writable import Refused
from ..metrics import UnknownMetric

DOCS = "Metric definitions: docs/metrics.md (`nbest-eval metrics` lists the keys)."
COMMANDS = ["score", "convert", "synth", "compare", "ablate", "select", "watch", "metrics", "user-dir"]
#: what a refused output adds, by whether asking to overwrite lifts the refusal (None: not the point)
FORCE_HINTS = {True: " (use --force)", False: ", even with --force", None: ""}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbest-eval", description=f"{nbest_eval.__doc__}\n\n{DOCS}",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {nbest_eval.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"nbest_eval.cli.{name.replace('-', '_')}")
        summary = (module.__doc__ or "").strip().splitlines()[0]
        command = sub.add_parser(name, help=summary, description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    # set up logging before any framework is imported: fairseq configures the root logger at import
    # (DEBUG), which would flood the output with every library's debug messages
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    parser = build_parser()
    args = parser.parse_args(argv)
    stdout = sys.stdout = _StandardOutput(sys.stdout)
    try:
        status = args.run(args)
        sys.stdout.flush()  # a full disk shows here, not as an error at exit
        return status
    except (InputError, UnknownMetric) as err:
        print(f"nbest-eval {args.command}: error: {error_message(err)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # whoever read our output stopped: end quietly, as Unix tools do
        stdout.failed = True
        return 1
    except KeyboardInterrupt:
        print(f"nbest-eval {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout = stdout.stream
        if stdout.failed:  # what is left in its buffer cannot be written either: no error flushing at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())


def error_message(err: Exception) -> str:
    """The error as the command line prints it: a refused output with what --force would change."""
    if isinstance(err, Refused):
        return f"{err.path}: {err.reason}{FORCE_HINTS[err.overwrite_lifts]}"
    return str(err)


class _StandardOutput:
    """``sys.stdout`` while a command runs: a write that fails (a full disk, a quota) is an
    :class:`InputError` naming standard output, not a traceback from wherever it was printed."""

    def __init__(self, stream):
        self.stream, self.failed = stream, False

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        return self._guarded(self.stream.write, text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as err:
            self.failed = True
            raise InputError(f"cannot write: {err.strerror or err}", "standard output") from None

