"""The ``java.util.Properties`` syntax: :func:`read_properties` of a ``.properties`` file.

Also what :meth:`~zkconsumer._config.ConsumerConfig.from_properties` reads a file with: the
key/value pairs and the file and line each came from, so that messages name them.
"""

from __future__ import annotations

import os
import re

from zkconsumer._config_keys import _raise_problems
from zkconsumer._errors import ConfigError

__all__ = ["read_properties"]


class _Invalid(Exception):
    """One escape is malformed; the argument is the reason."""


_PROP_WS = " \t\f"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) pairs, as java.util.Properties.LineReader does."""
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank and comment lines are never continued
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break
            line = natural[i].lstrip(_PROP_WS)
            i += 1
        out.append((start + 1, "".join(parts)))
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    """Java Properties escapes; unescaped trailing whitespace is dropped. Raises _Invalid."""
    chars: list[tuple[str, bool]] = []  # (char, was escaped)
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            chars.append((c, False))
            continue
        if i >= len(text):
            break  # a lone backslash at the very end is dropped, as in Java
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                shown = "\\u" + digits
                raise _Invalid(f"malformed \\uxxxx escape {shown!r}")
            chars.append((chr(int(digits, 16)), True))
            i += 4
        else:
            chars.append((_ESCAPES.get(c, c), True))
    while chars and not chars[-1][1] and chars[-1][0] in _PROP_WS:
        chars.pop()
    return "".join(c for c, _ in chars)


def _split_key_value(line: str) -> tuple[str, str, bool]:
    """(raw key, raw value, had a separator) of a logical line."""
    backslash = False
    key_end = len(line)
    has_sep = False
    for pos, c in enumerate(line):
        if backslash:
            backslash = False
            continue
        if c == "\\":
            backslash = True
        elif c in "=:" or c in _PROP_WS:
            key_end = pos
            has_sep = c in "=:"
            break
    pos = key_end + (1 if has_sep else 0)
    while pos < len(line) and line[pos] in _PROP_WS:
        pos += 1
    if not has_sep and pos < len(line) and line[pos] in "=:":
        has_sep = True
        pos += 1
        while pos < len(line) and line[pos] in _PROP_WS:
            pos += 1
    value = line[pos:]
    return line[:key_end], value, has_sep or bool(value)


def _parse_properties(text: str, source: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(properties, "source:line" by key, problems) of a properties document."""
    props: dict[str, str] = {}
    origins: dict[str, str] = {}
    problems: list[str] = []
    for lineno, line in _logical_lines(text):
        where = f"{source}:{lineno}"
        raw_key, raw_value, has_value = _split_key_value(line)
        try:
            key = _unescape(raw_key)
            value = _unescape(raw_value)
        except _Invalid as exc:
            problems.append(f"{where}: {exc}")
            continue
        if not key:
            problems.append(f"{where}: no key before the separator in {line!r}")
            continue
        if not has_value:
            problems.append(f"{where}: {line!r} is not key=value")
            continue
        props[key] = value
        origins[key] = where
    return props, origins, problems


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {os.fspath(path)!r}: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # what java.util.Properties.load(InputStream) reads
    return text.removeprefix("\ufeff")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """The key/value pairs of a Java properties file, keys not validated.

    Supports ``#``/``!`` comments, ``key=value``, ``key:value`` and ``key value``,
    backslash continuations and the ``\\t \\n \\r \\f \\\\ \\uXXXX`` escapes. The file is
    read as UTF-8, or ISO-8859-1 when it is not valid UTF-8. Raises ConfigError naming
    the file and line.
    """
    source = os.fspath(path)
    props, _, problems = _parse_properties(_read_text(path), source)
    _raise_problems(problems, f" in {source}")
    return props

