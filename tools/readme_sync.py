"""Regenerate the README's generated sections (the configuration table) in place."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zkconsumer._config_keys import config_table_markdown  # noqa: E402

START = "<!-- config-table:start"
END = "<!-- config-table:end -->"


def synced(text: str) -> str:
    head, rest = text.split(START, 1)
    marker_line, _ = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}{marker_line}\n{config_table_markdown().rstrip()}\n{END}{tail}"


def main() -> None:
    path = ROOT / "README.md"
    path.write_text(synced(path.read_text()))


if __name__ == "__main__":
    main()
