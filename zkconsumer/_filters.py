"""Topic filters for wildcard subscriptions: the legacy ``Whitelist`` and ``Blacklist``.

A filter holds a regex, normalised as Kafka's ``kafka.consumer.TopicFilter`` did (property
files may bring quotes and commas)::

    raw.trim()                      # Java trim: strip characters <= U+0020 at both ends
       .replace(',', '|')           # "a,b" means "a|b"
       .replace(" ", "")            # spaces removed everywhere
       .replaceAll("^[\\"']+", "")   # leading quotes
       .replaceAll("[\\"']+$", "")   # trailing quotes

and the regex must match the **whole** topic name (Java's ``String.matches``, here
:func:`re.fullmatch`): the whitelist ``a.*`` allows ``abc`` but not ``ba``.

The normalised regex is what goes into the ids znode (the key of the subscription, with
pattern ``white_list`` or ``black_list``), and every group member re-evaluates the others'
filters locally; so the internal topics excluded by ``exclude.internal.topics`` are the
ones of Kafka 0.10.2 (``__consumer_offsets`` only), to agree with JVM members.

The regex is shared with JVM members, which read it with ``java.util.regex``, so it is read
here in that dialect (:func:`java_regex_to_python`) and run with Python's :mod:`re`, which
agrees with Java on the common syntax (classes, alternation, quantifiers, anchors, groups,
possessive quantifiers and atomic groups). Java's named groups, ``\\k<name>``, ``\\Q..\\E``
and ``\\z`` are translated. What Java rejects or reads otherwise is refused (ConfigError for
the application's own filter, so nothing is registered that JVM members would fail on):
Python-only syntax (``(?P<name>``, ``(?#...)``, conditional groups ``(?(1)a|b)``, the
flags ``a`` and ``L``, ``{,n}``, ``\\U``), a ``{`` that starts no quantifier (a literal in
Python, an error in Java), the class operations Python lacks (``&&``, a class inside a
class), and escapes the two read differently (``\\v``; a digit escape that is a back
reference to one and an octal escape to the other). Java's octal ``\\0101`` is translated.
Java-only classes such as ``\\p{Alpha}`` are refused too.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import ClassVar

from zkconsumer._errors import ConfigError, ZkDataError

__all__ = [
    "INTERNAL_TOPICS",
    "Blacklist",
    "TopicFilter",
    "Whitelist",
    "filter_from_registration",
    "java_regex_to_python",
    "normalise_regex",
]

#: Topics ``exclude.internal.topics`` hides from wildcard subscriptions (Kafka 0.10.2).
INTERNAL_TOPICS: frozenset[str] = frozenset({"__consumer_offsets"})

_LEADING_QUOTES = re.compile(r"\A[\"']+")
_TRAILING_QUOTES = re.compile(r"[\"']+\Z")


def _java_trim(text: str) -> str:
    """``String.trim()``: drop leading and trailing characters <= U+0020 (and only those)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


_ASCII_DIGITS = frozenset("0123456789")
_QUANTIFIER = re.compile(r"\{\d+(,\d*)?\}")
_OCTAL = re.compile(r"[0-3][0-7]{2}|[0-7]{1,2}")
#: Inline flags ``(?imsx)``, ``(?i-s)``, ``(?i:...)``: the letters, with any "-".
_FLAGS = re.compile(r"\(\?([A-Za-z-]+)[:)]")
#: The inline flags ``java.util.regex`` knows.
_JAVA_FLAGS = "idmsuxU"
_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
#: Java's POSIX classes (US-ASCII only, as Java reads them without UNICODE_CHARACTER_CLASS):
#: ``\p{Name}`` -> the members, as the inside of a Python class.
_POSIX_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\x00-\x7f", "Alpha": "a-zA-Z",
    "Digit": "0-9", "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~", "Print": " -~", "Blank": " \t", "Cntrl": "\x00-\x1f\x7f",
    "XDigit": "0-9a-fA-F", "Space": " \t\n\x0b\f\r",
}
_POSIX = re.compile(r"\{(?:Is)?([A-Za-z]+)\}")
_HEX_BRACED = re.compile(r"\{([0-9a-fA-F]{1,6})\}")


def _group_name(regex: str, start: int, at: int) -> tuple[str, int]:
    """The group name from ``start`` up to its ``>``, and the index after it."""
    close = regex.find(">", start)
    if close < 0 or not _GROUP_NAME.fullmatch(regex[start:close]):
        raise ValueError(f"a bad group name at {at}")
    return regex[start:close], close + 1


def java_regex_to_python(regex: str) -> str:
    r"""The Python :mod:`re` pattern that means what ``java.util.regex`` reads ``regex`` as;
    ValueError for what Java rejects or Python cannot mean the same way::

        >>> java_regex_to_python(r"(?<env>prod|stage)-\Qa.b\E")
        '(?P<env>prod|stage)-a\\.b'
        >>> java_regex_to_python("topic-{a,b}")
        Traceback (most recent call last):
        ...
        ValueError: '{' at 6 starts no quantifier (Java: illegal repetition)
    """
    out: list[str] = []
    i, n = 0, len(regex)
    in_class = False  # inside [...]
    while i < n:
        c = regex[i]
        if c == "\\":
            text, i = _escape(regex, i, in_class)
        elif in_class:
            text, i, in_class = _in_class(regex, i)
        elif c == "[":
            text, i = _class_start(regex, i)
            in_class = True
        elif c == "(" and regex.startswith("(?", i):
            text, i = _group_start(regex, i)
        elif c == "{":
            text, i = _quantifier(regex, i)
        else:
            text, i = c, i + 1
        out.append(text)
    if in_class:
        raise ValueError("an unclosed class")
    return "".join(out)


def _escape(regex: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape at ``regex[i]`` (a backslash), in Python's syntax, and where the next
    token starts."""
    n = len(regex)
    if i + 1 >= n:
        raise ValueError("a trailing backslash")
    e = regex[i + 1]
    if e == "Q" and not in_class:
        end = regex.find("\\E", i + 2)
        literal = regex[i + 2:] if end < 0 else regex[i + 2:end]
        return re.escape(literal), n if end < 0 else end + 2
    if e == "k" and not in_class and regex.startswith("<", i + 2):
        name, i = _group_name(regex, i + 3, i)
        return f"(?P={name})", i
    if e == "0":
        # Java: \0 and one to three octal digits (the first <= 3 when three);
        # Python reads \0101 as \010 then "1". Written as \xhh for Python.
        m = _OCTAL.match(regex, i + 2)
        if m is None:
            raise ValueError(f"\\0 at {i} has no octal digit (Java: illegal octal escape)")
        return f"\\x{int(m.group(), 8):02x}", m.end()
    if e in "pP":
        m = _POSIX.match(regex, i + 2)
        members = _POSIX_CLASSES.get(m.group(1)) if m is not None else None
        if m is None or members is None:
            raise ValueError(f"\\{e} at {i} is a Java-only class (only the POSIX "
                             f"ones are read: {', '.join(_POSIX_CLASSES)})")
        if e == "P" and in_class:
            raise ValueError(f"\\P at {i} inside a class has no Python form")
        return (members if in_class else f"[{'^' if e == 'P' else ''}{members}]"), m.end()
    if e == "x" and regex.startswith("{", i + 2):
        m = _HEX_BRACED.match(regex, i + 2)
        if m is None or int(m.group(1), 16) > 0x10FFFF:
            raise ValueError(f"\\x{{...}} at {i} is not a code point")
        return f"\\U{int(m.group(1), 16):08x}", m.end()
    if e == "c":
        if i + 2 >= n or ord(regex[i + 2]) >= 128:
            raise ValueError(f"\\c at {i} names no ASCII control letter")
        return f"\\x{ord(regex[i + 2]) ^ 64:02x}", i + 3  # Java: the letter xor 64
    return _simple_escape(regex, i, in_class), i + 2


def _simple_escape(regex: str, i: int, in_class: bool) -> str:
    """A two-character escape (a backslash and ``regex[i + 1]``) in Python's syntax."""
    e = regex[i + 1]
    if e == "e":
        return "\\x1b"  # Java's escape character
    if e == "z":
        return "\\Z"
    if e in "hHRXN" or (e == "G" and not in_class):
        raise ValueError(f"\\{e} at {i} is Java-only")
    if e in "UL":
        raise ValueError(f"\\{e} at {i} is Python-only")
    if e in "vV":
        raise ValueError(f"\\{e} at {i} is vertical whitespace in Java, not in Python")
    if e in _ASCII_DIGITS and (in_class or regex[i + 2:i + 3] in _ASCII_DIGITS):
        # Python reads these as octal (in a class, or \ and three octal digits)
        # or as a two-digit back reference; Java otherwise. (ASCII only: both read
        # \ before another digit, "٣" say, as that character.)
        digits = re.match(r"[0-9]{1,3}", regex[i + 1:])
        assert digits is not None
        raise ValueError(f"\\{digits.group()} at {i} is read differently by Java and "
                         "Python (a back reference or an octal escape)")
    return "\\" + e


def _in_class(regex: str, i: int) -> tuple[str, int, bool]:
    """A character inside a class: itself, where the next starts, and whether the class
    goes on (Java's unions and intersections have no Python form)."""
    c = regex[i]
    if c == "[":
        raise ValueError(f"a class inside a class at {i} (Java: union)")
    if regex.startswith("&&", i):
        raise ValueError(f"'&&' at {i} (Java: class intersection)")
    return c, i + 1, c != "]"


def _class_start(regex: str, i: int) -> tuple[str, int]:
    """The ``[`` at ``i``, with a ``^`` and a ``]`` right after it: a ``]`` (after an
    optional ``^``) right at the start is a literal in both."""
    text, i = "[", i + 1
    if regex.startswith("^", i):
        text, i = text + "^", i + 1
    if regex.startswith("]", i):
        text, i = text + "\\]", i + 1
    return text, i


def _group_start(regex: str, i: int) -> tuple[str, int]:
    """The ``(?`` at ``i``: Python-only forms refused, inline flags checked, a named group
    renamed to Python's syntax."""
    if regex.startswith(("(?P", "(?#", "(?("), i):
        raise ValueError(f"{regex[i:i + 3]!r} at {i} is Python-only")
    flags = _FLAGS.match(regex, i)
    if flags is not None:
        other = sorted(set(flags.group(1)) - set(_JAVA_FLAGS + "-"))
        if other:
            raise ValueError(f"flag {''.join(other)!r} at {i} is not a Java flag "
                             f"(Java: {_JAVA_FLAGS})")
    if regex.startswith("(?<", i) and not regex.startswith(("(?<=", "(?<!"), i):
        name, i = _group_name(regex, i + 3, i)
        return f"(?P<{name}>", i
    return "(", i + 1


def _quantifier(regex: str, i: int) -> tuple[str, int]:
    """The ``{`` at ``i``: a quantifier, or Java's "illegal repetition"."""
    m = _QUANTIFIER.match(regex, i)
    if m is None or i == 0 or regex[i - 1] in "(|":
        raise ValueError(f"'{{' at {i} starts no quantifier (Java: illegal repetition)")
    return m.group(), m.end()


def normalise_regex(raw_regex: str) -> str:
    """Normalise a whitelist/blacklist regex exactly as the legacy ``TopicFilter``."""
    regex = _java_trim(raw_regex).replace(",", "|").replace(" ", "")
    regex = _LEADING_QUOTES.sub("", regex)
    return _TRAILING_QUOTES.sub("", regex)


class TopicFilter(ABC):
    """A regex over topic names; see :class:`Whitelist` and :class:`Blacklist`.

    The regex is normalised as the legacy ``TopicFilter`` did (commas mean ``|``, spaces and
    surrounding quotes dropped), must match a whole topic name, and is read in Java's
    dialect, since JVM members of the group read it too.

    :param raw_regex: the regex, as given on a command line or in a properties file.
    :raises ConfigError: ``raw_regex`` is not a string, is not a valid regex, or uses syntax
        Java and Python read differently.
    """

    #: How the ids znode names this kind of filter (its ``pattern``).
    pattern_name: ClassVar[str]

    __slots__ = ("_compiled", "_regex")

    def __init__(self, raw_regex: str) -> None:
        if not isinstance(raw_regex, str):
            raise ConfigError(f"topic filter regex must be a string, got {raw_regex!r}")
        regex = normalise_regex(raw_regex)
        try:
            # Read in Java's dialect: JVM members of the group read it so. ASCII: Java's
            # \w \d \s \b and (?i) are ASCII-only unless (?u) asks for Unicode case folding.
            unicode_case = any("u" in m.group(1).split("-")[0] for m in _FLAGS.finditer(regex))
            compiled = re.compile(java_regex_to_python(regex), 0 if unicode_case else re.ASCII)
        except (ValueError, re.error, RecursionError, OverflowError) as exc:
            raise ConfigError(
                f"{regex!r} is an invalid regex (from {raw_regex!r}): {exc}"
            ) from exc
        self._regex = regex
        self._compiled = compiled

    @property
    def regex(self) -> str:
        """The normalised regex, as written in the ids znode."""
        return self._regex

    def _matches(self, topic: str) -> bool:
        return self._compiled.fullmatch(topic) is not None

    @abstractmethod
    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool) -> bool:
        """Whether a wildcard subscription with this filter consumes ``topic``.

        :param topic: a topic name.
        :param exclude_internal_topics: leave out the internal topics
            (``__consumer_offsets``), as ``exclude.internal.topics=true`` does.
        """

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicFilter) or type(other) is not type(self):
            return NotImplemented
        return self._regex == other._regex

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._regex))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._regex!r})"

    def __str__(self) -> str:
        # Scala's TopicFilter.toString is the regex.
        return self._regex


class Whitelist(TopicFilter):
    """Consume the topics whose whole name matches the regex.

    >>> Whitelist("orders-.*, payments").is_topic_allowed("orders-eu", True)
    True
    >>> Whitelist("orders-.*").is_topic_allowed("old-orders-eu", True)
    False
    """

    pattern_name: ClassVar[str] = "white_list"
    __slots__ = ()

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool) -> bool:
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return self._matches(topic)


class Blacklist(TopicFilter):
    """Consume the topics whose whole name does not match the regex.

    >>> Blacklist("tmp-.*").is_topic_allowed("orders", True)
    True
    >>> Blacklist("tmp-.*").is_topic_allowed("__consumer_offsets", True)
    False
    """

    pattern_name: ClassVar[str] = "black_list"
    __slots__ = ()

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool) -> bool:
        if exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return not self._matches(topic)


def filter_from_registration(pattern: str, regex: str) -> TopicFilter | None:
    """The filter of another member's ids znode (its ``pattern`` and subscription key).

    None for ``static`` and, like the original, for any pattern it does not know.
    A regex that does not compile comes from ZooKeeper, not from the user, so it raises
    ZkDataError (not ConfigError).
    """
    cls: type[TopicFilter]
    if pattern == Whitelist.pattern_name:
        cls = Whitelist
    elif pattern == Blacklist.pattern_name:
        cls = Blacklist
    else:
        return None
    try:
        return cls(regex)
    except ConfigError as exc:
        raise ZkDataError(f"registered {pattern} regex is unusable: {exc}") from exc
