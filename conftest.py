"""Doctest collection of the package (``--doctest-modules`` over ``zkconsumer/``).

The classes ``zkconsumer`` re-exports carry ``__module__ = "zkconsumer"`` (see its
``__init__``), which doctest's finder reads as "defined elsewhere": it would skip their
methods' examples in the module that defines them. Here a class counts as from the module
``zkconsumer._DEFINED_IN`` names, and from nowhere else, so each example runs once.
"""

from __future__ import annotations

import doctest
import inspect
from typing import Any

import zkconsumer

_from_module = doctest.DocTestFinder._from_module  # type: ignore[attr-defined]


def _from_defining_module(self: doctest.DocTestFinder, module: Any, obj: Any) -> bool:
    if inspect.isclass(obj) and obj.__module__ == zkconsumer.__name__ and module is not None:
        home = zkconsumer._DEFINED_IN.get(obj.__name__)
        if home is not None:
            return bool(module.__name__ == home)
    return bool(_from_module(self, module, obj))


doctest.DocTestFinder._from_module = _from_defining_module  # type: ignore[attr-defined]
