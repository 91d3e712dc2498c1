"""Print the path of the installed fairseq --user-dir that registers the translation_nbest task.

    fairseq-train DATA --user-dir "$(nbest-eval user-dir)" --task translation_nbest --nbest-gold G ...
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from ..fairseq import USER_DIR  # a path only: fairseq itself is not imported

    print(USER_DIR)
    return 0
