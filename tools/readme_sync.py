"""Regenerate the docs' generated sections in place: the configuration table of
docs/configuration.md, between its config-table markers."""

from __future__ import annotations

from pathlib import Path

from zkconsumer._config_keys import config_table_markdown

ROOT = Path(__file__).resolve().parent.parent

START = "<!-- config-table:start"
END = "<!-- config-table:end -->"


def synced(text: str) -> str:
    head, rest = text.split(START, 1)
    marker_line, _ = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}{marker_line}\n{config_table_markdown().rstrip()}\n{END}{tail}"


#: The page that holds the generated configuration table.
CONFIG_PAGE = ROOT / "docs" / "configuration.md"


def main() -> None:
    CONFIG_PAGE.write_text(synced(CONFIG_PAGE.read_text()))


if __name__ == "__main__":
    main()
