"""jvm.compatibility: what changed between the JVM releases of the legacy consumer, copied
from them (golden values from Kafka 0.11.0.3 and 1.1.1 themselves, see test_jvm_*.py for
the live comparisons)."""

from __future__ import annotations

import pytest

from zkconsumer import ConfigError
from zkconsumer._config import ConsumerConfig
from zkconsumer._config_keys import JvmCompatibility
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.core import assign, java_string_hashcode, roundrobin_assign
from zkconsumer.zk import paths as zp

BASE = {"zookeeper.connect": "127.0.0.1:2181", "group.id": "g"}


def behaviour(value: str | None) -> JvmCompatibility:
    props = dict(BASE) if value is None else {**BASE, "jvm.compatibility": value}
    return ConsumerConfig(props).jvm_behaviour


def test_the_default_is_the_0_10_line() -> None:
    assert ConsumerConfig(BASE).jvm_compatibility == "0.10.2"
    b = behaviour(None)
    assert not b.dashed_partition_names and not b.regex_escaped_twice


@pytest.mark.parametrize(("release", "dashed", "twice"), [
    ("0.8.2", False, False), ("0.9.0.1", False, False), ("0.10.2.2", False, False),
    ("0.11.0.3", False, False), ("1.0.0", True, False), ("1.0", True, False),
    ("1.0.1", True, True), ("1.0.2", True, True), ("1.1.1", True, True), ("1.1", True, True),
])
def test_releases_map_to_their_behaviour(release: str, dashed: bool, twice: bool) -> None:
    b = behaviour(release)
    assert (b.dashed_partition_names, b.regex_escaped_twice) == (dashed, twice)


@pytest.mark.parametrize(("value", "said"), [
    ("2.0.0", "no ZooKeeper consumer"), ("3.9", "no ZooKeeper consumer"),
    ("0.8.1", "older than 0.8.2"), ("latest", "not a Kafka release"), ("1", "not a Kafka"),
])
def test_other_values_are_refused_in_one_line(value: str, said: str) -> None:
    with pytest.raises(ConfigError, match=f"jvm.compatibility.*{said}"):
        ConsumerConfig({**BASE, "jvm.compatibility": value})


# ---- the ids JSON: what each release writes for a whitelist (seen from the JVMs) ----

def test_a_regex_is_registered_as_0_11_writes_it_by_default() -> None:
    reg = zp.ConsumerRegistration.wildcard(zp.PATTERN_WHITELIST, "dev\\d", 1, 1795846100260)
    # Kafka 0.11.0.3's member with --whitelist 'dev\d', byte for byte:
    assert reg.encode() == (b'{"version":1,"subscription":{"dev\\\\d":1},"pattern":"white_list",'
                            b'"timestamp":"1795846100260"}')


def test_a_regex_is_registered_escaped_twice_as_1_1_writes_it() -> None:
    reg = zp.ConsumerRegistration.wildcard(zp.PATTERN_WHITELIST, "dev\\d", 1, 1795846088362)
    # Kafka 1.1.1's member with --whitelist 'dev\d', byte for byte:
    assert reg.encode(regex_escaped_twice=True) == (
        b'{"version":1,"subscription":{"dev\\\\\\\\d":1},"pattern":"white_list",'
        b'"timestamp":"1795846088362"}')
    # and every reader, JVM or zkconsumer, takes the escaped text for the regex
    assert zp.ConsumerRegistration.decode(
        reg.encode(regex_escaped_twice=True)).wildcard_regex == "dev\\\\d"


def test_static_subscriptions_are_never_escaped() -> None:
    reg = zp.ConsumerRegistration.static({"a/b": 1}, 5)
    assert reg.encode(regex_escaped_twice=True) == reg.encode()


@pytest.mark.parametrize(("regex", "escaped"), [
    (".*", ".*"), ("a|b", "a|b"), ("a\\.b", "a\\\\.b"), ("x/y", "x\\/y"), ('"q"', '\\"q\\"'),
    ("\t\n\r\b\f", "\\t\\n\\r\\b\\f"), ("\x00\x1f\x7f\x9f\xa0", "\\u0000\\u001f\\u007f\\u009f\xa0"),
])
def test_jvm_json_escape_is_core_utils_json_escape_string(regex: str, escaped: str) -> None:
    assert zp.jvm_json_escape(regex) == escaped


# ---- roundrobin's dealing order ----

def test_roundrobin_orders_by_the_hash_of_the_releases_partition_name() -> None:
    cft = {"t": ["c-0", "c-1", "c-2"]}
    parts = {"t": range(12)}
    old = roundrobin_assign(cft, parts)
    new = roundrobin_assign(cft, parts, dashed_names=True)
    assert old != new
    # 1.x deals "t-0".."t-9" (hashes rising) before "t-10", "t-11"; 0.x deals "[t,10]" and
    # "[t,11]" (negative hashes) first.
    assert java_string_hashcode("t-9") < java_string_hashcode("t-10")
    assert [new[TopicPartition("t", p)] for p in (0, 1, 2, 9, 10, 11)] == [
        "c-0", "c-1", "c-2", "c-0", "c-1", "c-2"]
    assert [old[TopicPartition("t", p)] for p in (10, 11, 0)] == ["c-0", "c-1", "c-2"]
    assert assign("roundrobin", cft, parts, dashed_names=True) == new
    assert assign("range", cft, parts, dashed_names=True) == assign("range", cft, parts)


def test_the_examples_in_the_docstrings() -> None:
    import doctest

    from zkconsumer import _config as _config
    from zkconsumer import _config_keys as _config_keys
    from zkconsumer.consumer.assignors import jvmcompat as _jvmcompat

    for module in (_jvmcompat, _config, _config_keys):
        assert doctest.testmod(module).failed == 0
