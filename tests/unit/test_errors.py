"""Every public exception lives in zkconsumer._errors, and its docstring draws them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

from zkconsumer import _errors


def _classes() -> dict[str, type[BaseException]]:
    """The exceptions _errors defines (their ``__module__`` is the public ``zkconsumer``)."""
    return {name: c for name, c in vars(_errors).items()
            if inspect.isclass(c) and issubclass(c, BaseException)
            and c.__module__ in (_errors.__name__, "zkconsumer")}


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


def _defined_exceptions(module: ModuleType) -> list[str]:
    """The public exception classes of zkconsumer in ``module`` that _errors does not define,
    whatever they derive from (their ``__module__`` may have been made ``zkconsumer``)."""
    ours = set(_classes().values())
    return [f"{module.__name__}.{name}" for name, c in vars(module).items()
            if inspect.isclass(c) and issubclass(c, BaseException) and c not in ours
            and c.__module__.split(".")[0] == "zkconsumer" and not name.startswith("_")
            and not c.__name__.startswith("_")]


def test_no_public_exception_is_defined_elsewhere() -> None:
    import zkconsumer

    elsewhere = []
    for info in pkgutil.walk_packages(zkconsumer.__path__, "zkconsumer."):
        if info.name != "zkconsumer.__main__":
            elsewhere += _defined_exceptions(importlib.import_module(info.name))
    assert elsewhere == []


def test_the_check_sees_an_exception_of_a_foreign_base() -> None:
    # Derived from a library's exception, not from a name ending in Error: still seen.
    from kazoo.exceptions import ConnectionLoss

    planted = ModuleType("zkconsumer.planted")
    exec("class Unproven(ConnectionLoss):\n    pass\n",
         {"ConnectionLoss": ConnectionLoss, "__name__": planted.__name__}, vars(planted))
    assert _defined_exceptions(planted) == ["zkconsumer.planted.Unproven"]


def test_every_public_exception_is_exported_from_the_package() -> None:
    import zkconsumer

    missing = [name for name in _classes() if getattr(zkconsumer, name, None) is None]
    assert missing == []


def test_the_public_names_show_the_public_module() -> None:
    import zkconsumer

    assert zkconsumer.ConfigError.__module__ == "zkconsumer"
    assert repr(zkconsumer.ConfigError) == "<class 'zkconsumer.ConfigError'>"
    assert zkconsumer.ConsumerConfig.__module__ == "zkconsumer"
