"""Every public exception lives in zkconsumer._errors, and its docstring draws them all."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from zkconsumer import _errors

PACKAGE = Path(__file__).resolve().parents[2] / "zkconsumer"


def _classes() -> dict[str, type[BaseException]]:
    return {name: c for name, c in vars(_errors).items()
            if inspect.isclass(c) and issubclass(c, BaseException)
            and c.__module__ == _errors.__name__}


def test_the_drawing_shows_every_class_under_its_parent() -> None:
    drawn: dict[str, str] = {}
    parents: list[str] = []
    for line in (_errors.__doc__ or "").split("::", 1)[1].splitlines():
        match = re.match(r"^    ((?:[│ ]   )*)(?:[├└]── )?(\w+)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + (1 if "── " in line else 0)
        parents[depth:] = [match.group(2)]
        drawn[match.group(2)] = parents[depth - 1] if depth else ""
    classes = _classes()
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        if parent:
            assert issubclass(classes[name], classes[parent]), (name, parent)


def test_no_public_exception_is_defined_elsewhere() -> None:
    elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_errors.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and any(re.search(r"(Error|Exception)$", ast.unparse(b))
                            for b in node.bases)):
                elsewhere.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert elsewhere == []


def test_every_public_exception_is_exported_from_the_package() -> None:
    import zkconsumer

    missing = [name for name in _classes() if getattr(zkconsumer, name, None) is None]
    assert missing == []
