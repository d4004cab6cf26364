"""What every subcommand module shares: the one-line failure, argument types, stdout."""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence
from typing import NoReturn

from zkconsumer.ops.common import did_you_mean

EXIT_USAGE = 2


#: The longest wait or interval a flag takes, in seconds: far below what the clocks and
#: timers underneath can hold (an infinite or huge one overflowed them, with a traceback).
MAX_SECONDS = 1_000_000.0


def with_notes(message: str, e: BaseException) -> str:
    """``message`` and the notes the library added to ``e`` on its way out (what a write
    that failed part way had written), as one line."""
    return "; ".join([message, *getattr(e, "__notes__", ())])


def positive_seconds(text: str) -> float:
    """argparse type of a duration in seconds: a finite number > 0 and <= MAX_SECONDS.

    Zero or less made the bridge spin at full CPU and the tools fail oddly; ``inf`` and
    ``nan`` parse as floats but mean nothing as a wait.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (0 < value <= MAX_SECONDS):  # False for nan too
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds > 0 and <= {MAX_SECONDS:.0f}, got {text!r}")
    return value


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (poll reports an error)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def silence_stdout() -> None:
    """Point stdout at /dev/null: further writes, and the interpreter's flush at exit,
    would raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line: the message, a misspelt flag named with
    the one most likely meant, and where the usage is. (argparse printed the whole usage,
    and a misspelt required flag as "the following arguments are required" instead.)"""

    #: The command line being parsed (set by ``cli.main``), to find misspelt flags in.
    argv: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        unknown = self._unknown_flags(Parser.argv)
        if unknown:
            message = "; ".join(
                f"unknown flag {flag}{did_you_mean(flag, self._long_flags(), quote=False)}"
                for flag in unknown)
        self.exit(2, f"{self.prog}: error: {message} (-h for help)\n")

    def _long_flags(self) -> list[str]:
        return [f for f in self._option_string_actions if f.startswith("--")]

    def _unknown_flags(self, argv: Sequence[str]) -> list[str]:
        known = set(self._option_string_actions) | _TOP_FLAGS
        out = []
        for token in argv:
            flag = token.split("=", 1)[0]
            if (not flag.startswith("-") or flag == "-" or flag == "--" or flag in known
                    or _number(flag)):
                continue
            # argparse takes an unambiguous prefix of a long flag.
            if flag.startswith("--") and sum(f.startswith(flag) for f in known) == 1:
                continue
            out.append(flag)
        return out


#: The top-level flags, given before the subcommand.
_TOP_FLAGS = {"-v", "--verbose", "--version", "-h", "--help"}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
