"""What every subcommand module shares: the one-line failure, argument types, stdout."""

from __future__ import annotations

import argparse
import os
import select
import sys

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
