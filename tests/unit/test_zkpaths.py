"""Tests for zkconsumer.zk.paths: paths, ids and the znode payloads.

The golden strings are what the JVM consumer writes (docs/znodes.md, "Payloads"), written out
here byte for byte, never produced by the module under test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from zkconsumer._errors import ZkDataError
from zkconsumer.zk import paths as _zkpaths
from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONSUMERS,
    BrokerRegistration,
    ConsumerRegistration,
    PartitionState,
    TopicAssignment,
    broker_path,
    decode_offset,
    decode_owner,
    encode_offset,
    encode_owner,
    group_dir,
    id_path,
    ids_dir,
    make_consumer_id,
    offset_path,
    offsets_dir,
    offsets_topic_dir,
    owner_path,
    owners_dir,
    owners_topic_dir,
    parse_offset_line,
    parse_offset_path,
    parse_owner_path,
    partition_state_path,
    partitions_dir,
    thread_consumer_id,
    thread_ids,
    topic_path,
)

# Byte for byte as the JVM consumer writes them (docs/znodes.md, "Payloads").
REF_IDS = b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1494000000000"}'
REF_BROKER_TEMPLATE = (
    '{"version":4,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,'
    '"timestamp":"...","rack":null,"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}'
)
REF_TOPIC = b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
REF_STATE = b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1,2]}'

# What a real 0.8 broker wrote.
BROKER_V1_08 = (
    b'{"jmx_port":10055,"timestamp":"1453380999577","host":"192.168.48.153","version":1,'
    b'"port":9092}'
)
STATE_REAL = b'{"controller_epoch":1775,"leader":3,"version":1,"leader_epoch":145,"isr":[3,5]}'


# --------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------


def test_path_builders() -> None:
    assert CONSUMERS == "/consumers"
    assert BROKER_IDS == "/brokers/ids"
    assert BROKER_TOPICS == "/brokers/topics"
    assert group_dir("g") == "/consumers/g"
    assert ids_dir("g") == "/consumers/g/ids"
    assert id_path("g", "g_c1") == "/consumers/g/ids/g_c1"
    assert owners_dir("g") == "/consumers/g/owners"
    assert owners_topic_dir("g", "t") == "/consumers/g/owners/t"
    assert owner_path("g", "t", 3) == "/consumers/g/owners/t/3"
    assert offsets_dir("g") == "/consumers/g/offsets"
    assert offsets_topic_dir("g", "t") == "/consumers/g/offsets/t"
    assert offset_path("g", "t", 0) == "/consumers/g/offsets/t/0"
    assert broker_path(7) == "/brokers/ids/7"
    assert topic_path("t.x-1") == "/brokers/topics/t.x-1"
    assert partitions_dir("t") == "/brokers/topics/t/partitions"
    assert partition_state_path("t", 12) == "/brokers/topics/t/partitions/12/state"


BAD_NAMES: list[Any] = ["", "a/b", "/", ".", "..", "a\x00b", None, 5, b"g"]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_path_builders_reject_bad_names(bad: Any) -> None:
    with pytest.raises(ValueError):
        group_dir(bad)
    with pytest.raises(ValueError):
        ids_dir(bad)
    with pytest.raises(ValueError):
        id_path("g", bad)
    with pytest.raises(ValueError):
        owners_topic_dir("g", bad)
    with pytest.raises(ValueError):
        owner_path(bad, "t", 0)
    with pytest.raises(ValueError):
        offsets_topic_dir("g", bad)
    with pytest.raises(ValueError):
        offset_path("g", bad, 0)
    with pytest.raises(ValueError):
        topic_path(bad)
    with pytest.raises(ValueError):
        partitions_dir(bad)
    with pytest.raises(ValueError):
        partition_state_path(bad, 0)


@pytest.mark.parametrize("bad", [-1, True, "0", 1.0, None])
def test_path_builders_reject_bad_numbers(bad: Any) -> None:
    with pytest.raises(ValueError):
        owner_path("g", "t", bad)
    with pytest.raises(ValueError):
        offset_path("g", "t", bad)
    with pytest.raises(ValueError):
        broker_path(bad)
    with pytest.raises(ValueError):
        partition_state_path("t", bad)


def test_parse_offset_path() -> None:
    assert parse_offset_path("/consumers/g/offsets/t/0") == ("g", "t", 0)
    assert parse_offset_path("/consumers/my.group-1/offsets/my_topic/17") == (
        "my.group-1",
        "my_topic",
        17,
    )
    assert parse_offset_path(offset_path("g", "t", 5)) == ("g", "t", 5)
    assert parse_owner_path("/consumers/g/owners/t/3") == ("g", "t", 3)
    assert parse_owner_path(owner_path("g", "t", 9)) == ("g", "t", 9)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "/consumers/g/offsets/t",
        "/consumers/g/offsets/t/",
        "/consumers/g/offsets/t/x",
        "/consumers/g/offsets/t/-1",
        "/consumers/g/offsets/t/0/",
        "/consumers/g/owners/t/0",
        "consumers/g/offsets/t/0",
        "/consumers//offsets/t/0",
        "/consumers/g/offsets/t/0:5",
        "/consumers/g/offsets/a/b/0",
        "/consumers/g/offsets/t/\u0661",
        "/consumers/../offsets/t/0",
    ],
)
def test_parse_offset_path_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_offset_path(bad)


def test_parse_owner_path_rejects_offsets_path() -> None:
    with pytest.raises(ValueError):
        parse_owner_path("/consumers/g/offsets/t/0")


def test_parse_offset_line() -> None:
    assert parse_offset_line("/consumers/g/offsets/t/0:42\n") == ("g", "t", 0, 42)
    assert parse_offset_line("/consumers/g/offsets/t/3:-1") == ("g", "t", 3, -1)
    for bad in ["/consumers/g/offsets/t/0", "/consumers/g/offsets/t/0:x", "x:1", "/c:1"]:
        with pytest.raises(ValueError):
            parse_offset_line(bad)


# --------------------------------------------------------------------------------------
# Consumer and thread ids
# --------------------------------------------------------------------------------------


def test_generated_consumer_id_format() -> None:
    cid = make_consumer_id("grp", None)
    assert re.fullmatch(r"grp_[^/]+-[0-9]{13,}-[0-9a-f]{8}", cid), cid
    assert make_consumer_id("grp", None) != cid  # a fresh uuid each time


def test_generated_consumer_id_exact() -> None:
    cid = make_consumer_id(
        "grp", None, hostname="host1", now_ms=1494000000000, uuid_hex8="0a1b2c3d"
    )
    assert cid == "grp_host1-1494000000000-0a1b2c3d"


def test_consumer_id_setting() -> None:
    assert make_consumer_id("grp", "worker-7") == "grp_worker-7"
    assert make_consumer_id("grp", "worker-7", hostname="h", now_ms=1) == "grp_worker-7"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"group": "", "consumer_id_setting": None},
        {"group": "a/b", "consumer_id_setting": None},
        {"group": "g", "consumer_id_setting": "a/b"},
        {"group": "g", "consumer_id_setting": ""},
        {"group": "g", "consumer_id_setting": None, "uuid_hex8": "xyz"},
        {"group": "g", "consumer_id_setting": None, "uuid_hex8": "0A1B2C3D"},
        {"group": "g", "consumer_id_setting": None, "now_ms": -5},
        {"group": "g", "consumer_id_setting": None, "hostname": ""},
    ],
)
def test_make_consumer_id_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_consumer_id(**kwargs)


def test_thread_ids() -> None:
    assert thread_ids("g_c", 3) == ["g_c-0", "g_c-1", "g_c-2"]
    assert thread_ids("g_c", 0) == []
    assert len(thread_ids("g_c", 12)) == 12
    with pytest.raises(ValueError):
        thread_ids("g_c", -1)
    with pytest.raises(ValueError):
        thread_ids("", 1)


def test_thread_consumer_id() -> None:
    assert thread_consumer_id("g_c-0") == "g_c"
    assert thread_consumer_id("g_host-1494000000000-0a1b2c3d-12") == (
        "g_host-1494000000000-0a1b2c3d"
    )
    for tid in thread_ids("grp_h-1-abcdef01", 4):
        assert thread_consumer_id(tid) == "grp_h-1-abcdef01"


@pytest.mark.parametrize("bad", ["", "g_c", "g_c-", "-0", "g_c-x", "g_c-1a", "g_c-\u0661"])
def test_thread_consumer_id_rejects(bad: str) -> None:
    with pytest.raises(ZkDataError):
        thread_consumer_id(bad)


# --------------------------------------------------------------------------------------
# Consumer registration
# --------------------------------------------------------------------------------------


def test_consumer_registration_golden() -> None:
    reg = ConsumerRegistration({"t": 2}, "static", 1494000000000)
    assert reg.encode() == REF_IDS
    assert ConsumerRegistration.static({"t": 2}, 1494000000000).encode() == REF_IDS
    decoded = ConsumerRegistration.decode(REF_IDS, "/consumers/g/ids/c")
    assert decoded == reg
    assert not decoded.is_wildcard
    assert decoded.wildcard_regex is None
    assert decoded.wildcard_streams is None


def test_consumer_registration_records_the_strategy_as_an_extra_field() -> None:
    reg = ConsumerRegistration({"t": 2}, "static", 1494000000000, assignment_strategy="sticky")
    assert reg.encode() == (
        b'{"version":1,"subscription":{"t":2},"pattern":"static",'
        b'"timestamp":"1494000000000","assignment_strategy":"sticky"}'
    )
    assert ConsumerRegistration.decode(reg.encode()) == reg
    # Without the field (a JVM member): None, and nothing else changes.
    assert ConsumerRegistration.decode(REF_IDS).assignment_strategy is None
    # Anything but a non-empty string reads as absent.
    for bad in (b'1', b'""', b'null', b'["sticky"]'):
        data = REF_IDS[:-1] + b',"assignment_strategy":' + bad + b'}'
        assert ConsumerRegistration.decode(data).assignment_strategy is None
    with pytest.raises(ValueError, match="assignment_strategy"):
        ConsumerRegistration({"t": 1}, "static", 1, assignment_strategy="")


def test_consumer_registration_says_where_a_zkconsumer_member_commits() -> None:
    reg = ConsumerRegistration({"t": 2}, "static", 1494000000000, offsets_storage="dual")
    assert reg.encode() == REF_IDS[:-1] + b',"offsets_storage":"dual"}'
    assert ConsumerRegistration.decode(reg.encode()) == reg
    assert ConsumerRegistration.decode(REF_IDS).offsets_storage is None  # a JVM member's
    for bad in (b'1', b'"Kafka"', b'null'):  # anything else reads as absent
        data = REF_IDS[:-1] + b',"offsets_storage":' + bad + b'}'
        assert ConsumerRegistration.decode(data).offsets_storage is None
    with pytest.raises(ValueError, match="offsets_storage"):
        ConsumerRegistration({"t": 1}, "static", 1, offsets_storage="both")


def test_consumer_registration_wildcards() -> None:
    wl = ConsumerRegistration.wildcard("white_list", "a.*|b", 3, 1494000000000)
    assert wl.encode() == (
        b'{"version":1,"subscription":{"a.*|b":3},"pattern":"white_list",'
        b'"timestamp":"1494000000000"}'
    )
    assert wl.is_wildcard and wl.wildcard_regex == "a.*|b" and wl.wildcard_streams == 3
    bl = ConsumerRegistration({r"x\.y": 1}, "black_list", 5)
    assert bl.encode() == (
        b'{"version":1,"subscription":{"x\\\\.y":1},"pattern":"black_list","timestamp":"5"}'
    )
    for reg in (wl, bl):
        assert ConsumerRegistration.decode(reg.encode()) == reg


def test_consumer_registration_round_trip_many_topics() -> None:
    reg = ConsumerRegistration({"b": 1, "a": 4, "t\u00e9": 2}, "static", 1)
    data = reg.encode()
    assert data.startswith(b'{"version":1,"subscription":{"b":1,"a":4,"t\xc3\xa9":2}')
    assert ConsumerRegistration.decode(data) == reg


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # timestamp as a number
        (
            b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":1494000000000}',
            ConsumerRegistration({"t": 2}, "static", 1494000000000),
        ),
        # timestamp missing, version missing, key order different
        (
            b'{"pattern":"static","subscription":{"t":2}}',
            ConsumerRegistration({"t": 2}, "static", -1),
        ),
        # counts as strings
        (
            b'{"version":1,"subscription":{"t":"2","u":"10"},"pattern":"static",'
            b'"timestamp":"7"}',
            ConsumerRegistration({"t": 2, "u": 10}, "static", 7),
        ),
        # unknown pattern reads as static
        (
            b'{"version":1,"subscription":{"t":2},"pattern":"something","timestamp":"7"}',
            ConsumerRegistration({"t": 2}, "static", 7),
        ),
        # missing pattern reads as static
        (b'{"subscription":{"t":1},"timestamp":"7"}', ConsumerRegistration({"t": 1}, "static", 7)),
        # a wildcard with no subscription reads as static (as the original)
        (
            b'{"version":1,"subscription":{},"pattern":"white_list","timestamp":"7"}',
            ConsumerRegistration({}, "static", 7),
        ),
        # whitespace, extra keys, another version
        (
            b' { "version" : 2, "subscription" : { "t" : 1 }, "pattern" : "white_list" ,'
            b' "timestamp" : "7", "extra": [1] } ',
            ConsumerRegistration({"t": 1}, "white_list", 7, 2),
        ),
    ],
)
def test_consumer_registration_tolerant(data: bytes, expected: ConsumerRegistration) -> None:
    assert ConsumerRegistration.decode(data, "/consumers/g/ids/c") == expected


def test_consumer_registration_rejects_bad_construction() -> None:
    with pytest.raises(ValueError):
        ConsumerRegistration({"t": 1}, "nope", 1)
    with pytest.raises(ValueError):
        ConsumerRegistration({"a": 1, "b": 1}, "white_list", 1)
    with pytest.raises(ValueError):
        ConsumerRegistration({"t": -1}, "static", 1)
    with pytest.raises(ValueError):
        ConsumerRegistration.wildcard("static", "a", 1, 1)


# --------------------------------------------------------------------------------------
# Owners and offsets
# --------------------------------------------------------------------------------------


def test_owner_round_trip() -> None:
    assert encode_owner("g_c-0") == b"g_c-0"
    assert decode_owner(b"g_c-0") == "g_c-0"
    assert decode_owner(b"  g_c-1\n", "/p") == "g_c-1"
    assert decode_owner(encode_owner("g_h\u00e9-0")) == "g_h\u00e9-0"
    with pytest.raises(ValueError):
        encode_owner("")


def test_offset_round_trip() -> None:
    assert encode_offset(0) == b"0"
    assert encode_offset(1234567890123) == b"1234567890123"
    assert encode_offset(-1) == b"-1"
    for n in (0, 1, 42, 2**63 - 1, -1):
        assert decode_offset(encode_offset(n)) == n
    assert decode_offset(b" 17\n") == 17
    assert decode_offset(b"+5") == 5
    for bad in (-2, True, 2**63):
        with pytest.raises(ValueError):
            encode_offset(bad)


# --------------------------------------------------------------------------------------
# Brokers
# --------------------------------------------------------------------------------------


def test_broker_golden() -> None:
    reg = BrokerRegistration(
        1,
        ["PLAINTEXT://h:9092"],
        "h",
        9092,
        timestamp_ms=1494000000000,
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
    )
    expected = REF_BROKER_TEMPLATE.replace('"..."', '"1494000000000"').encode()
    assert reg.encode() == expected
    # Without an explicit map, listeners are named after their protocol.
    assert (
        BrokerRegistration(1, ["PLAINTEXT://h:9092"], "h", 9092, timestamp_ms=1494000000000)
        .encode()
        == expected
    )
    decoded = BrokerRegistration.decode(expected, "/brokers/ids/1")
    assert decoded == reg
    assert decoded.endpoint() == ("h", 9092)


def test_broker_round_trip_versions() -> None:
    for version in (1, 2, 3, 4, 5):
        reg = BrokerRegistration(
            3,
            [] if version == 1 else ["PLAINTEXT://b3:9092", "SSL://b3:9093"],
            "b3",
            9092,
            jmx_port=9999,
            timestamp_ms=42,
            rack="r1" if version >= 3 else None,
            listener_security_protocol_map=(
                {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"} if version >= 4 else None
            ),
            features={"metadata.version": {"min_version": 1, "max_version": 7}}
            if version == 5
            else None,
            version=version,
        )
        decoded = BrokerRegistration.decode(reg.encode(), broker_id=3)
        assert decoded == reg, version
        assert decoded.endpoint() == ("b3", 9092)


def test_broker_v1_from_real_08_broker() -> None:
    reg = BrokerRegistration.decode(BROKER_V1_08, "/brokers/ids/5")
    assert reg.broker_id == 5
    assert reg.version == 1
    assert reg.endpoints == []
    assert reg.host == "192.168.48.153"
    assert reg.port == 9092
    assert reg.jmx_port == 10055
    assert reg.timestamp_ms == 1453380999577
    assert reg.rack is None
    assert reg.endpoint() == ("192.168.48.153", 9092)
    assert reg.endpoint("plaintext") == ("192.168.48.153", 9092)
    with pytest.raises(ZkDataError, match="broker 5"):
        reg.endpoint("SSL")


def test_broker_v2_and_v5() -> None:
    v2 = (
        b'{"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://k1:9092"],'
        b'"host":"k1","version":2,"port":9092}'
    )
    reg = BrokerRegistration.decode(v2, "/brokers/ids/0")
    assert reg.version == 2 and reg.rack is None and reg.listener_security_protocol_map is None
    assert reg.endpoint() == ("k1", 9092)
    # A Kafka 2.8 broker: hash-map key order, no rack, features.
    v5 = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://kafka:9092"],"jmx_port":-1,"port":9092,"host":"kafka",'
        b'"version":5,"timestamp":"1650000000000"}'
    )
    reg5 = BrokerRegistration.decode(v5, "/brokers/ids/1001")
    assert reg5.broker_id == 1001
    assert reg5.version == 5
    assert reg5.features == {}
    assert reg5.endpoint() == ("kafka", 9092)


def test_broker_named_listeners_and_ipv6() -> None:
    data = (
        b'{"version":4,"host":null,"port":-1,'
        b'"endpoints":["INTERNAL://[fe80::1%eth0]:9093","CLIENT://[::1]:9092","REPL://r:9094"],'
        b'"jmx_port":-1,"timestamp":"1","rack":"dc1","listener_security_protocol_map":'
        b'{"INTERNAL":"SSL","CLIENT":"PLAINTEXT","REPL":"PLAINTEXT"}}'
    )
    reg = BrokerRegistration.decode(data, "/brokers/ids/2")
    assert reg.host is None and reg.rack == "dc1"
    assert reg.endpoint() == ("::1", 9092)  # first listener whose protocol is PLAINTEXT
    assert reg.endpoint("CLIENT") == ("::1", 9092)
    assert reg.endpoint("repl") == ("r", 9094)
    assert reg.endpoint("INTERNAL") == ("fe80::1%eth0", 9093)
    assert reg.endpoint("SSL") == ("fe80::1%eth0", 9093)
    with pytest.raises(ZkDataError, match="broker 2"):
        reg.endpoint("SASL_SSL")


def test_broker_unbracketed_ipv6_like_kafka() -> None:
    reg = BrokerRegistration(1, ["PLAINTEXT://::1:9092"], None, -1, timestamp_ms=1)
    assert reg.endpoint() == ("::1", 9092)


def test_broker_no_usable_endpoint() -> None:
    reg = BrokerRegistration(
        9, ["PLAINTEXT://:9092", "PLAINTEXT://h:0", "garbage"], None, -1, timestamp_ms=1
    )
    with pytest.raises(ZkDataError, match="broker 9"):
        reg.endpoint()
    v1_no_host = BrokerRegistration.decode(
        b'{"version":1,"host":null,"port":9092,"jmx_port":-1}', "/brokers/ids/4"
    )
    with pytest.raises(ZkDataError, match="broker 4"):
        v1_no_host.endpoint()


def test_broker_id_source() -> None:
    assert BrokerRegistration.decode(BROKER_V1_08).broker_id == -1
    assert BrokerRegistration.decode(BROKER_V1_08, "/x/y").broker_id == -1
    assert BrokerRegistration.decode(BROKER_V1_08, "/brokers/ids/5", broker_id=6).broker_id == 6


# --------------------------------------------------------------------------------------
# Topics and partition state
# --------------------------------------------------------------------------------------


def test_topic_assignment_golden() -> None:
    ta = TopicAssignment({0: [1, 2], 1: [2, 3]})
    assert ta.encode() == REF_TOPIC
    assert TopicAssignment.decode(REF_TOPIC, "/brokers/topics/t") == ta


def test_topic_assignment_numeric_order() -> None:
    ta = TopicAssignment({10: [1], 2: [2], 0: [3], 1: [1]})
    assert ta.encode() == b'{"version":1,"partitions":{"0":[3],"1":[1],"2":[2],"10":[1]}}'
    decoded = TopicAssignment.decode(b'{"version":1,"partitions":{"10":[1],"2":[2],"0":[3]}}')
    assert list(decoded.partitions) == [0, 2, 10]
    assert decoded.partition_ids == [0, 2, 10]


def test_topic_assignment_newer_versions() -> None:
    v2 = (
        b'{"version":2,"partitions":{"1":[2,3],"0":[1,2]},"adding_replicas":{},'
        b'"removing_replicas":{"0":[2]}}'
    )
    assert TopicAssignment.decode(v2).partitions == {0: [1, 2], 1: [2, 3]}
    v3 = (
        b'{"partitions":{"0":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","adding_replicas":{},'
        b'"removing_replicas":{},"version":3}'
    )
    decoded = TopicAssignment.decode(v3)
    assert decoded.partitions == {0: [1]} and decoded.version == 3
    assert TopicAssignment.decode(b'{"partitions":{}}') == TopicAssignment({})


def test_partition_state_golden() -> None:
    st = PartitionState(leader=1, leader_epoch=0, controller_epoch=1, isr=[1, 2])
    assert st.encode() == REF_STATE
    assert PartitionState.decode(REF_STATE) == st
    assert st.has_leader


def test_partition_state_real_and_newer() -> None:
    st = PartitionState.decode(STATE_REAL, "/brokers/topics/t/partitions/0/state")
    assert st == PartitionState(3, 145, 1775, [3, 5])
    v2 = (
        b'{"controller_epoch":3,"leader":-1,"version":2,"leader_recovery_state":0,'
        b'"leader_epoch":4,"isr":[],"partition_epoch":9}'
    )
    st2 = PartitionState.decode(v2)
    assert st2 == PartitionState(-1, 4, 3, [], 2)
    assert not st2.has_leader
    assert PartitionState.decode(b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1]}')


# --------------------------------------------------------------------------------------
# Garbage: every decoder raises ZkDataError naming the path, and nothing else
# --------------------------------------------------------------------------------------

COMMON_GARBAGE: list[Any] = [
    None,
    b"",
    b"   ",
    b"\xff\xfe\x00",
    b"{",
    b"not json",
    b"null",
    b"[]",
    b"[1,2]",
    b'"string"',
    b"42",
    b"true",
    b"{}",
    b'{"version":NaN}',
    b"[" * 100000,
    "a str, not bytes",
    12,
]

IDS_GARBAGE: list[Any] = [
    *COMMON_GARBAGE,
    b'{"version":1,"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":null,"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":["t"],"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":"t","pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":"two"},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":1.5},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":true},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":-1},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":null},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"":1},"pattern":"static","timestamp":"1"}',
    b'{"version":1,"subscription":{"t":1},"pattern":5,"timestamp":"1"}',
    b'{"version":1,"subscription":{"a":1,"b":1},"pattern":"white_list","timestamp":"1"}',
]

OWNER_GARBAGE: list[Any] = [None, b"", b"  \n", b"\xff\xfe", b"\xc3", "str", 5]

OFFSET_GARBAGE: list[Any] = [
    None,
    b"",
    b"  ",
    b"abc",
    b"12abc",
    b"1.5",
    b"1e3",
    b"-2",
    b"-100",
    b"0x10",
    b"1_000",
    b"\xd9\xa1",  # Arabic-Indic digit one: int() would accept it
    b"\xff",
    b"9223372036854775808",
    b"--1",
    b"1 2",
    "12",
    12,
]

BROKER_GARBAGE: list[Any] = [
    *COMMON_GARBAGE,
    b'{"host":"h","port":9092}',
    b'{"version":0,"host":"h","port":9092}',
    b'{"version":"4","host":"h","port":9092}',
    b'{"version":4,"host":5,"port":9092,"endpoints":[]}',
    b'{"version":4,"host":"h","port":"x","endpoints":[]}',
    b'{"version":4,"host":"h","port":9092,"endpoints":"PLAINTEXT://h:9092"}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[1]}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[],"rack":3}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[],"listener_security_protocol_map":[]}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[],'
    b'"listener_security_protocol_map":{"A":1}}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[],"jmx_port":"x"}',
    b'{"version":4,"host":"h","port":9092,"endpoints":[],"timestamp":{}}',
    b'{"version":5,"host":"h","port":9092,"endpoints":[],"features":[]}',
    b'{"version":5,"host":"h","port":9092,"endpoints":[],"features":{"f":1}}',
    b'{"version":5,"host":"h","port":9092,"endpoints":[],"features":{"f":{"min":"a"}}}',
]

TOPIC_GARBAGE: list[Any] = [
    *COMMON_GARBAGE,
    b'{"version":1}',
    b'{"version":1,"partitions":null}',
    b'{"version":1,"partitions":[[1,2]]}',
    b'{"version":1,"partitions":{"x":[1]}}',
    b'{"version":1,"partitions":{"-1":[1]}}',
    b'{"version":1,"partitions":{"0":1}}',
    b'{"version":1,"partitions":{"0":["1"]}}',
    b'{"version":1,"partitions":{"0":[1.0]}}',
    b'{"version":1,"partitions":{"0":[1],"00":[2]}}',
    b'{"version":"x","partitions":{"0":[1]}}',
]

STATE_GARBAGE: list[Any] = [
    *COMMON_GARBAGE,
    b'{"version":1,"leader_epoch":0,"controller_epoch":1,"isr":[1]}',
    b'{"version":1,"leader":1,"controller_epoch":1,"isr":[1]}',
    b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1]}',
    b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1}',
    b'{"version":1,"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1]}',
    b'{"version":1,"leader":null,"leader_epoch":0,"controller_epoch":1,"isr":[1]}',
    b'{"version":1,"leader":-2,"leader_epoch":0,"controller_epoch":1,"isr":[1]}',
    b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":"1"}',
    b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[null]}',
    b'{"version":1,"leader":1,"leader_epoch":[],"controller_epoch":1,"isr":[1]}',
]


def _check_garbage(decode: Any, data: Any, path: str) -> None:
    with pytest.raises(ZkDataError) as info:
        decode(data, path)
    assert path in str(info.value)


@pytest.mark.parametrize("data", IDS_GARBAGE)
def test_consumer_registration_garbage(data: Any) -> None:
    _check_garbage(ConsumerRegistration.decode, data, "/consumers/g/ids/g_c")


@pytest.mark.parametrize(("data", "version", "timestamp"), [
    (b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"soon"}', 1, -1),
    (b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":[1]}', 1, -1),
    (b'{"version":"one","subscription":{"t":1},"pattern":"static","timestamp":"1"}', 1, 1),
    (b'{"version":-3,"subscription":{"t":1},"pattern":"static","timestamp":"1"}', 1, 1),
    (b'{"version":"2","subscription":{"t":1},"pattern":"static",'
     b'"timestamp":"2017-05-05T00:00:00Z"}', 2, -1),
])
def test_consumer_registration_fields_the_jvm_never_reads_are_tolerated(
    data: bytes, version: int, timestamp: int
) -> None:
    """The JVM reads only pattern and subscription: a member is never left out of the view
    (the others would compute another assignment) for its version or timestamp."""
    reg = ConsumerRegistration.decode(data, "/consumers/g/ids/g_c")
    assert (reg.subscription, reg.pattern) == ({"t": 1}, "static")
    assert (reg.version, reg.timestamp_ms) == (version, timestamp)


@pytest.mark.parametrize("data", OWNER_GARBAGE)
def test_owner_garbage(data: Any) -> None:
    _check_garbage(decode_owner, data, "/consumers/g/owners/t/0")


@pytest.mark.parametrize("data", OFFSET_GARBAGE)
def test_offset_garbage(data: Any) -> None:
    _check_garbage(decode_offset, data, "/consumers/g/offsets/t/0")


@pytest.mark.parametrize("data", BROKER_GARBAGE)
def test_broker_garbage(data: Any) -> None:
    _check_garbage(BrokerRegistration.decode, data, "/brokers/ids/1")


@pytest.mark.parametrize("data", TOPIC_GARBAGE)
def test_topic_garbage(data: Any) -> None:
    _check_garbage(TopicAssignment.decode, data, "/brokers/topics/t")


@pytest.mark.parametrize("data", STATE_GARBAGE)
def test_partition_state_garbage(data: Any) -> None:
    _check_garbage(PartitionState.decode, data, "/brokers/topics/t/partitions/0/state")


def test_garbage_without_path_still_zkdataerror() -> None:
    for decode in (
        ConsumerRegistration.decode,
        BrokerRegistration.decode,
        TopicAssignment.decode,
        PartitionState.decode,
        decode_owner,
        decode_offset,
    ):
        with pytest.raises(ZkDataError, match="unknown path"):
            decode(None)


def test_znode_names_of_partitions_and_brokers_are_read_as_the_jvm_writes_them() -> None:
    """``str.isdigit`` took "²" (then ``int`` raised) and "007" (another znode's path)."""
    assert [_zkpaths.parse_id(n) for n in ("0", "7", "12", "007", "²", "٣", "-1", "+1", "1 ", "")
            ] == [0, 7, 12, None, None, None, None, None, None, None]
