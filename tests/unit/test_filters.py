"""Tests for zkconsumer._filters: legacy Whitelist / Blacklist topic filters."""

from __future__ import annotations

import pytest

from zkconsumer._errors import ConfigError, ZkDataError
from zkconsumer._filters import (
    INTERNAL_TOPICS,
    Blacklist,
    TopicFilter,
    Whitelist,
    filter_from_registration,
    java_regex_to_python,
    normalise_regex,
)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("a.*", "a.*"),
        ("  a.*  ", "a.*"),
        ("\t\na.*\r\n", "a.*"),
        ('"a.*"', "a.*"),
        ("'a.*'", "a.*"),
        ("  \"a.*\"  ", "a.*"),
        ("a,b,c", "a|b|c"),
        ("a, b , c", "a|b|c"),
        ('"a, b"', "a|b"),
        ("'\"a\"'", "a"),  # any run of leading / trailing quotes, as the original
        ("\" 'a'\"", "a"),  # spaces go before the quotes are stripped
        ("a b", "ab"),
        ("a'b", "a'b"),  # quotes inside stay
        ("", ""),
        ("\u00a0a\u00a0", "\u00a0a\u00a0"),  # Java trim only strips <= U+0020
    ],
)
def test_normalisation(raw: str, normalised: str) -> None:
    assert normalise_regex(raw) == normalised
    assert Whitelist(raw).regex == normalised
    assert Blacklist(raw).regex == normalised


def test_whole_name_match() -> None:
    wl = Whitelist("a.*")
    assert wl.is_topic_allowed("a", True)
    assert wl.is_topic_allowed("abc", True)
    assert not wl.is_topic_allowed("ba", True)  # search() would have matched
    assert not Whitelist("b").is_topic_allowed("ab", False)
    assert not Whitelist("b").is_topic_allowed("bc", False)
    assert Whitelist("foo|bar").is_topic_allowed("bar", False)
    assert not Whitelist("foo|bar").is_topic_allowed("foobar", False)
    assert Whitelist("t1,t2").is_topic_allowed("t2", False)
    assert not Whitelist("t1,t2").is_topic_allowed("t12", False)
    # "$" is not special at a newline: the whole name has to match.
    assert not Whitelist("a$").is_topic_allowed("a\n", False)


def test_internal_topic_exclusion() -> None:
    assert INTERNAL_TOPICS == frozenset({"__consumer_offsets"})
    wl = Whitelist(".*")
    assert not wl.is_topic_allowed("__consumer_offsets", True)
    assert wl.is_topic_allowed("__consumer_offsets", False)
    assert wl.is_topic_allowed("__other", True)
    bl = Blacklist("x")
    assert not bl.is_topic_allowed("__consumer_offsets", True)
    assert bl.is_topic_allowed("__consumer_offsets", False)


def test_blacklist() -> None:
    bl = Blacklist("a.*")
    assert not bl.is_topic_allowed("abc", True)
    assert bl.is_topic_allowed("ba", True)  # does not match the whole name
    assert bl.is_topic_allowed("b", False)
    assert not Blacklist("t1,t2").is_topic_allowed("t1", False)
    assert Blacklist("").is_topic_allowed("anything", False)


@pytest.mark.parametrize("raw", ["a(", "[a", "*a", "a)", r"\p{L}+", "(?<", "a**"])
def test_invalid_regex(raw: str) -> None:
    for cls in (Whitelist, Blacklist):
        with pytest.raises(ConfigError) as info:
            cls(raw)
        assert normalise_regex(raw) in str(info.value)
        assert "invalid regex" in str(info.value)


def test_not_a_string() -> None:
    with pytest.raises(ConfigError):
        Whitelist(5)  # type: ignore[arg-type]


def test_pattern_names_eq_repr() -> None:
    assert Whitelist("a").pattern_name == "white_list"
    assert Blacklist("a").pattern_name == "black_list"
    assert Whitelist(" 'a,b' ") == Whitelist("a|b")
    assert Whitelist("a") != Blacklist("a")
    assert Whitelist("a") != Whitelist("b")
    assert Whitelist("a") != "a"
    assert hash(Whitelist("a,b")) == hash(Whitelist("a|b"))
    assert len({Whitelist("a"), Whitelist("'a'"), Blacklist("a")}) == 2
    assert repr(Whitelist("a,b")) == "Whitelist('a|b')"
    assert repr(Blacklist("x")) == "Blacklist('x')"
    assert str(Whitelist("a,b")) == "a|b"
    assert isinstance(Whitelist("a"), TopicFilter)
    with pytest.raises(TypeError):
        TopicFilter("a")  # type: ignore[abstract]


def test_filter_from_registration() -> None:
    assert filter_from_registration("static", "t") is None
    assert filter_from_registration("unknown", "t") is None
    assert filter_from_registration("white_list", "a.*") == Whitelist("a.*")
    assert filter_from_registration("black_list", "a.*") == Blacklist("a.*")
    wl = Whitelist(" 'x,y' ")
    assert filter_from_registration(wl.pattern_name, wl.regex) == wl
    with pytest.raises(ZkDataError):
        filter_from_registration("white_list", "a(")


@pytest.mark.parametrize(("java", "python"), [
    ("a.*", "a.*"),
    ("t[0-9]{2,3}|u{2,}", "t[0-9]{2,3}|u{2,}"),
    ("(?<env>prod|stage)-(\\k<env>)", "(?P<env>prod|stage)-((?P=env))"),
    ("\\Qa.b\\E-x", "a\\.b-x"),
    ("\\Qa.b", "a\\.b"),  # \Q to the end
    ("a\\z", "a\\Z"),
    ("[]a]|[^]b]", "[\\]a]|[^\\]b]"),
    ("a(?<=a)(?<!b)", "a(?<=a)(?<!b)"),
    ("x*+(?>a|b)\\{1\\}[{]", "x*+(?>a|b)\\{1\\}[{]"),
    # Java's POSIX classes (ASCII), \e, \cX and \x{h...}: a JVM member's regex with them
    # was skipped, and the members computed other assignments.
    ("\\p{Lower}+-\\P{Digit}", "[a-z]+-[^0-9]"),
    ("[\\p{Alnum}_.]+", "[a-zA-Z0-9_.]+"),
    ("\\p{IsPunct}\\e\\cA\\x{41}", "[!-/:-@\\[-`{-~]\\x1b\\x01\\U00000041"),
])
def test_java_regex_dialect_is_translated(java: str, python: str) -> None:
    assert java_regex_to_python(java) == python


@pytest.mark.parametrize("java", [
    "topic-{a|b}",  # a '{' that starts no quantifier: Java's "illegal repetition"
    "ev{,2}",  # Python reads {0,2}
    "{2}a",
    "(?P<x>o)",  # Python-only named group
    "a(?#comment)",
    "[a-z&&[^x]]+",  # Java intersection: Python would read it another way
    "[a[b]]",  # Java union
    "\\p{L}+",  # a Unicode category: no Python re form
    "\\p{javaLowerCase}",
    "[^\\P{Digit}]",  # a negated POSIX class inside a class
    "\\x{110000}",
    "\\h",
    "[ab",
    "a\\",
])
def test_what_java_rejects_or_reads_otherwise_is_refused(java: str) -> None:
    with pytest.raises(ValueError):
        java_regex_to_python(java)


def test_filters_are_read_in_the_java_dialect() -> None:
    """Nothing is registered that JVM members fail on, and a JVM member's filter with Java
    syntax is understood (it was skipped, so the members computed other assignments)."""
    with pytest.raises(ConfigError, match="illegal repetition"):
        Whitelist("topic-{a,b}")  # normalised to topic-{a|b}
    theirs = filter_from_registration("white_list", "(?<env>prod|stage)-events")
    assert theirs is not None and theirs.regex == "(?<env>prod|stage)-events"
    assert theirs.is_topic_allowed("prod-events", True)
    assert not theirs.is_topic_allowed("dev-events", True)
    with pytest.raises(ZkDataError):
        filter_from_registration("white_list", "\\p{L}+")


def test_the_module_examples_hold() -> None:
    import doctest

    from zkconsumer import _filters as _filters

    result = doctest.testmod(_filters)
    assert result.attempted >= 2 and result.failed == 0


@pytest.mark.parametrize(("java", "python"), [
    ("\\0101", "\\x41"),  # Java octal: 'A'; Python read \010 (backspace) then "1"
    ("\\07", "\\x07"),
    ("\\0377x", "\\xffx"),
    ("\\0477", "\\x277"),  # the first digit > 3: two digits, then a literal 7
    ("[\\0101-\\0132]+", "[\\x41-\\x5a]+"),
    ("(?i)foo|(?i-s:bar)", "(?i)foo|(?i-s:bar)"),
    ("(a)\\1", "(a)\\1"),
])
def test_java_octal_escapes_and_flags_are_read_as_java_reads_them(
    java: str, python: str
) -> None:
    assert java_regex_to_python(java) == python


def test_a_java_octal_escape_matches_what_java_matches() -> None:
    wl = Whitelist("\\0101-topic")
    assert wl.is_topic_allowed("A-topic", False)
    assert not wl.is_topic_allowed("\b1-topic", False)


@pytest.mark.parametrize(("java", "why"), [
    ("(?a)foo", "not a Java flag"),  # Python-only flags
    ("(?L:x)", "not a Java flag"),
    ("(?ai)x", "not a Java flag"),
    ("(a)?(?(1)b|c)", "Python-only"),  # conditional group
    ("\\U0001F600", "Python-only"),
    ("[\\U0001F600]", "Python-only"),
    ("\\0", "no octal digit"),  # Java: illegal octal escape
    ("\\08", "no octal digit"),
    ("(a)\\12", "read differently"),  # back reference 12 to Python, \1 then 2 to Java
    ("[\\1]", "read differently"),  # octal to Python, an error to Java
    ("a\\v", "vertical whitespace"),
])
def test_python_only_syntax_is_refused(java: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        java_regex_to_python(java)
    with pytest.raises(ConfigError, match="invalid regex"):
        Whitelist(java)
    # Another member's: unusable, as for any regex that does not translate.
    with pytest.raises(ZkDataError):
        filter_from_registration("white_list", java)


@pytest.mark.parametrize("java, topic", [("a\\٣٣", "a٣٣"), ("[\\٣]x", "٣x")])
def test_an_escaped_non_ascii_digit_is_that_character(java: str, topic: str) -> None:
    """Both engines read it as the character; the check for digit escapes took it for an
    ASCII digit and failed an assertion (a traceback in the CLI, a failed rebalance)."""
    assert Whitelist(java).is_topic_allowed(topic, True)


def test_case_insensitive_and_class_escapes_are_ascii_as_in_java() -> None:
    """Java's (?i), \\w and \\d are ASCII-only unless (?u) or (?U): Python's are Unicode,
    so a JVM member and a zkconsumer member read "(?i)logſ" (long s) differently."""
    assert not Whitelist("(?i)log\u017f").is_topic_allowed("logs", True)
    assert Whitelist("(?i)LOGS").is_topic_allowed("logs", True)
    assert not Whitelist("\\w+").is_topic_allowed("caf\u00e9", True)
    assert Whitelist("(?iu)log\u017f").is_topic_allowed("logs", True)
    assert Whitelist("\\p{Lower}+-\\p{Digit}").is_topic_allowed("abc-1", True)
    assert not Whitelist("\\p{Lower}+").is_topic_allowed("abC", True)
