"""Broad exception handlers are checkable: ruff's BLE rule (pyproject.toml) refuses one that
neither re-raises nor logs the error, unless its ``noqa: BLE001`` says why dropping is right;
this test refuses a ``noqa: BLE001`` that gives no reason (RUF100 refuses one that suppresses
nothing)."""

from __future__ import annotations

import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The suppression comment with the blind-except code (others may stand beside it), a dash and
#: the reason.
WITH_REASON = re.compile(r"#\s*noqa:\s*(?:[A-Z]+\d+,\s*)*BLE001(?:,\s*[A-Z]+\d+)*\s+-\s+\S")


def unexplained(paths: list[Path]) -> list[str]:
    """The noqa comments naming BLE001 without a reason (comments only: the tokenizer's)."""
    found = []
    for path in paths:
        with path.open("rb") as f:
            for tok in tokenize.tokenize(f.readline):
                if tok.type == tokenize.COMMENT and "BLE001" in tok.string \
                        and "noqa" in tok.string and not WITH_REASON.search(tok.string):
                    found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.string}")
    return found


def _sources() -> list[Path]:
    return [p for d in ("zkconsumer", "tools", "tests") for p in sorted((ROOT / d).rglob("*.py"))]


def test_every_broad_handler_kept_quiet_says_why() -> None:
    assert unexplained(_sources()) == []


def test_the_check_sees_a_bare_noqa() -> None:
    planted = ROOT / "tests" / "unit" / "_planted_handler.py"
    try:
        planted.write_text("try:\n    pass\nexcept Exception:  # noqa: BLE001\n    pass\n")
        assert [f.split(": ", 1)[0] for f in unexplained([planted])] == [
            "tests/unit/_planted_handler.py:3"]
    finally:
        planted.unlink()
