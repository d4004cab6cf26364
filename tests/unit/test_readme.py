"""The README is a short front page; the docs pages hold the rest, all of them in the site's nav.

The configuration table of docs/configuration.md is the one the config module generates.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tools.readme_sync import CONFIG_PAGE, synced

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_config_table_in_sync() -> None:
    text = CONFIG_PAGE.read_text()
    assert text == synced(text), "run: .venv/bin/python tools/readme_sync.py"
    for key in ("zookeeper.connect", "auto.offset.reset", "dual.commit.enabled"):
        assert f"`{key}`" in text


def test_readme_names_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "`tools/demo`" in text and "`tools/test`" in text


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move sections to docs/"


def _nav_pages(nav: object) -> list[str]:
    """Every page file named in mkdocs.yml's nav, however deep."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def test_every_docs_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, "every page in docs/ belongs in mkdocs.yml's nav"
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"


def test_readme_relative_links_exist() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets, "the README links to the docs pages"
    for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # an absolute URL, or an anchor of the README itself
        path = target.split("#", 1)[0]
        assert (ROOT / path).exists(), f"README.md links to {target}, which does not exist"


def test_readme_links_every_docs_page() -> None:
    text = (ROOT / "README.md").read_text()
    for page in DOCS.glob("*.md"):
        if page.name != "index.md":
            assert f"(docs/{page.name}" in text, f"the README's index lacks docs/{page.name}"
