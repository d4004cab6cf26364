"""Tables for the command line that never lose a character.

Piped or redirected (a script reading them), a table is its header line and one line per
row, the cells separated by one space, no padding: ``awk '{print $3}'`` reads the third
column. On a terminal the columns are aligned with two spaces between them when they fit
its width; when they do not, every row is printed as a block of ``HEADER  value`` lines
instead (a stacked layout), so that nothing is ever cut to "..." and every id can be copied.
An empty cell is ``-`` in every layout, so that the columns of a line never shift.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["Table", "terminal_width"]

#: The gap between two aligned columns.
GAP = "  "


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width of the terminal ``stream`` (default stdout) writes to, or None when it is
    not a terminal (a pipe, a file, a test's capture). ``COLUMNS`` wins, as for ``ls``."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return None
    return shutil.get_terminal_size().columns


class Table:
    """Rows of cells under headers; ``right`` names the columns aligned to the right
    (numbers) on a terminal."""

    def __init__(self, headers: Sequence[str], right: Sequence[str] = ()) -> None:
        self.headers = list(headers)
        self._right = {self.headers.index(h) for h in right}
        self.rows: list[list[str]] = []

    def add_row(self, *cells: object) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{len(cells)} cells for {len(self.headers)} columns")
        self.rows.append([_cell(c) for c in cells])

    def lines(self, width: int | None) -> list[str]:
        """The table for a terminal ``width`` columns wide, or piped (``width`` None)."""
        if width is None:
            return [" ".join(row) for row in [self.headers, *self.rows]]
        widths = [max(len(r[i]) for r in [self.headers, *self.rows])
                  for i in range(len(self.headers))]
        if sum(widths) + len(GAP) * (len(widths) - 1) <= width:
            return [self._aligned(row, widths) for row in [self.headers, *self.rows]]
        return self._stacked()

    def _aligned(self, row: Sequence[str], widths: Sequence[int]) -> str:
        cells = [c.rjust(w) if i in self._right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return GAP.join(cells).rstrip()

    def _stacked(self) -> list[str]:
        name_width = max(len(h) for h in self.headers)
        out: list[str] = []
        for n, row in enumerate(self.rows):
            if n:
                out.append("")
            out += [f"{h.ljust(name_width)}{GAP}{c}".rstrip()
                    for h, c in zip(self.headers, row, strict=True)]
        return out

    def print(self, stream: TextIO | None = None) -> None:
        """Print the table on ``stream`` (default: the current stdout), laid out for it."""
        stream = sys.stdout if stream is None else stream
        for line in self.lines(terminal_width(stream)):
            print(line, file=stream)


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text if text else "-"
