"""The README's configuration table is the one the config module generates."""

from __future__ import annotations

from pathlib import Path

from tools.readme_sync import synced

ROOT = Path(__file__).resolve().parent.parent


def test_readme_config_table_in_sync() -> None:
    text = (ROOT / "README.md").read_text()
    assert text == synced(text), "run: .venv/bin/python tools/readme_sync.py"
    for key in ("zookeeper.connect", "auto.offset.reset", "dual.commit.enabled"):
        assert f"`{key}`" in text


def test_readme_names_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "`tools/demo`" in text and "`tools/test`" in text
