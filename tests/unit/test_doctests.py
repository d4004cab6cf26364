"""The examples in the docstrings of the classes ``zkconsumer`` re-exports run once, in the
module that defines them, although those classes say ``__module__ == "zkconsumer"`` (the
root conftest.py teaches doctest's finder where they come from)."""

from __future__ import annotations

import doctest

import zkconsumer
from zkconsumer import _config


def _with_examples(module: object) -> set[str]:
    return {t.name for t in doctest.DocTestFinder().find(module) if t.examples}


def test_an_exported_class_is_examined_where_it_is_defined() -> None:
    assert zkconsumer.ConsumerConfig.__module__ == "zkconsumer"
    assert "zkconsumer._config.ConsumerConfig" in _with_examples(_config)


def test_and_not_again_in_the_package() -> None:
    assert not {n for n in _with_examples(zkconsumer) if n.startswith("zkconsumer.Consumer")}
