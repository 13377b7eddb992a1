"""What every ``neurips26`` command line shares: user errors are one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

EXIT_USAGE = 2


class UsageError(Exception):
    """An error the user can fix (bad option, unreadable input); printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """``argparse`` whose errors raise ``UsageError`` instead of printing the usage block and exiting."""

    def error(self, message: str) -> None:
        raise UsageError(message)


def int_at_least(minimum: int, expected: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``; otherwise ``"<expected>, got '<text>'"``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    return parse


def run_main(prog: str, body: Callable[[list[str]], int], argv: Sequence[str] | None,
             user_errors: tuple[type[BaseException], ...] = ()) -> int:
    """Run ``body(argv)``; ``UsageError`` (and ``user_errors``) become ``prog: error: ...``, exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return int(body(argv) or 0)
    except (UsageError, *user_errors) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
