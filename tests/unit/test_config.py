"""Tests of zkconsumer._config.ConsumerConfig.

The expected defaults are written out here from the legacy consumer's documented defaults
(docs/znodes.md, "Configuration defaults") and zkconsumer's extensions, never read from the
module under test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zkconsumer._config import ConsumerConfig
from zkconsumer._config_keys import CONFIG_KEYS, ZkAcl, ZkSaslLogin, config_table_markdown
from zkconsumer._errors import ConfigError, ZkConsumerError
from zkconsumer._properties import read_properties

MIN: dict[str, object] = {"zookeeper.connect": "zk1:2181", "group.id": "grp"}

# The legacy consumer's keys (docs/znodes.md, "Configuration defaults"), in its order, with
# the derived defaults resolved for MIN.
LEGACY_DEFAULTS: dict[str, object] = {
    "zookeeper.connect": "zk1:2181",
    "zookeeper.session.timeout.ms": 6000,
    "zookeeper.connection.timeout.ms": 6000,
    "zookeeper.sync.time.ms": 2000,
    "group.id": "grp",
    "consumer.id": None,
    "client.id": "grp",
    "socket.timeout.ms": 30000,
    "socket.receive.buffer.bytes": 65536,
    "fetch.message.max.bytes": 1048576,
    "num.consumer.fetchers": 1,
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "queued.max.message.chunks": 2,
    "auto.commit.enable": True,
    "auto.commit.interval.ms": 60000,
    "auto.offset.reset": "largest",
    "consumer.timeout.ms": -1,
    "rebalance.max.retries": 4,
    "rebalance.backoff.ms": 2000,
    "refresh.leader.backoff.ms": 200,
    "exclude.internal.topics": True,
    "partition.assignment.strategy": "range",
    "offsets.storage": "zookeeper",
    "dual.commit.enabled": False,
    "offsets.channel.backoff.ms": 1000,
    "offsets.channel.socket.timeout.ms": 10000,
    "offsets.commit.max.retries": 5,
}

EXTENSION_DEFAULTS: dict[str, object] = {
    "fetch.backend": "confluent",
    "jvm.compatibility": "0.10.2",
    "metrics.port": None,
    "metrics.address": "127.0.0.1",
    "zookeeper.auth": None,
    "zookeeper.acl": None,
    "bootstrap.servers": None,
    "security.protocol": "PLAINTEXT",
    "ssl.cafile": None,
    "ssl.certfile": None,
    "ssl.keyfile": None,
    "ssl.password": None,
    "ssl.check.hostname": True,
    "sasl.mechanism": None,
    "sasl.plain.username": None,
    "sasl.plain.password": None,
    "sasl.kerberos.service.name": "kafka",
    "zookeeper.outage.delivery": "pause",
}

ALL_DEFAULTS = {**LEGACY_DEFAULTS, **EXTENSION_DEFAULTS}


def cfg(**overrides: object) -> ConsumerConfig:
    """MIN plus overrides given with underscores for dots (socket_timeout_ms=...)."""
    props: dict[str, object] = dict(MIN)
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return ConsumerConfig(props)


def config_error(props: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig(props)
    return str(info.value)


def with_min(**dotted: object) -> dict[str, object]:
    return {**MIN, **{k.replace("__", "."): v for k, v in dotted.items()}}


# ---------------------------------------------------------------------------------------
# The table and the defaults


def test_table_lists_exactly_the_reference_keys_then_the_extensions_in_order() -> None:
    assert [k.name for k in CONFIG_KEYS] == list(ALL_DEFAULTS)


def test_every_default_matches_the_reference() -> None:
    c = ConsumerConfig(MIN)
    for key, expected in ALL_DEFAULTS.items():
        actual = c.get(key)
        assert actual == expected, key
        assert type(actual) is type(expected), key


def test_every_key_has_a_typed_snake_case_attribute() -> None:
    c = ConsumerConfig(MIN)
    for key, expected in ALL_DEFAULTS.items():
        assert getattr(c, key.replace(".", "_")) == expected, key


def test_named_attributes() -> None:
    c = ConsumerConfig(MIN)
    assert c.zookeeper_connect == "zk1:2181"
    assert c.group_id == "grp"
    assert c.auto_commit_enable is True
    assert c.rebalance_backoff_ms == 2000
    assert c.offsets_storage == "zookeeper"
    assert c.fetch_backend == "confluent"
    assert c.metrics_port is None
    assert c.sasl_kerberos_service_name == "kafka"


def test_attributes_are_read_only() -> None:
    c = ConsumerConfig(MIN)
    with pytest.raises(AttributeError):
        c.group_id = "other"  # type: ignore[assignment]
    with pytest.raises(AttributeError):
        del c.group_id
    with pytest.raises(AttributeError):
        c.some_new_attribute = 1  # type: ignore[attr-defined]
    assert c.group_id == "grp"


def test_getitem_and_get_agree() -> None:
    c = cfg(socket_timeout_ms=5000)
    assert c["socket.timeout.ms"] == 5000
    assert c.get("socket.timeout.ms") == 5000
    assert c["auto.commit.enable"] is True


def test_unknown_key_lookup_suggests() -> None:
    c = ConsumerConfig(MIN)
    with pytest.raises(KeyError, match=r"did you mean 'group\.id'\?"):
        c["group.idd"]
    with pytest.raises(KeyError, match="auto.commit.enable"):
        c.get("auto.comit.enable")


def test_table_entries_are_frozen() -> None:
    with pytest.raises(AttributeError):
        CONFIG_KEYS[0].name = "x"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------
# Derived defaults


def test_connection_timeout_follows_session_timeout() -> None:
    c = cfg(zookeeper_session_timeout_ms=9000)
    assert c.zookeeper_session_timeout_ms == 9000
    assert c.zookeeper_connection_timeout_ms == 9000


def test_connection_timeout_override() -> None:
    c = cfg(zookeeper_session_timeout_ms=9000, zookeeper_connection_timeout_ms=1500)
    assert c.zookeeper_connection_timeout_ms == 1500
    assert c.zookeeper_session_timeout_ms == 9000


def test_client_id_follows_group_id_and_can_be_overridden() -> None:
    assert cfg(group_id="orders").client_id == "orders"
    c = ConsumerConfig({**MIN, "client.id": "my-client"})
    assert c.client_id == "my-client"
    assert c.group_id == "grp"


def test_rebalance_backoff_follows_sync_time_and_can_be_overridden() -> None:
    assert cfg(zookeeper_sync_time_ms=700).rebalance_backoff_ms == 700
    c = ConsumerConfig({**MIN, "zookeeper.sync.time.ms": 700, "rebalance.backoff.ms": 50})
    assert (c.rebalance_backoff_ms, c.zookeeper_sync_time_ms) == (50, 700)


@pytest.mark.parametrize(
    ("storage", "dual", "expected"),
    [
        ("zookeeper", None, False),
        ("kafka", None, True),
        ("KAFKA", None, True),
        ("Kafka", "false", False),
        ("zookeeper", "true", True),
    ],
)
def test_dual_commit_follows_offsets_storage(
    storage: str, dual: str | None, expected: bool
) -> None:
    props: dict[str, object] = {**MIN, "offsets.storage": storage}
    if dual is not None:
        props["dual.commit.enabled"] = dual
    c = ConsumerConfig(props)
    assert c.offsets_storage == storage.lower()
    assert c.dual_commit_enabled is expected


def test_derived_default_is_not_reported_twice_when_its_base_is_bad() -> None:
    msg = config_error({**MIN, "zookeeper.session.timeout.ms": "x"})
    assert msg == "zookeeper.session.timeout.ms='x' is not an integer"


# ---------------------------------------------------------------------------------------
# Coercion


def test_strings_from_a_properties_file_are_coerced() -> None:
    c = ConsumerConfig(
        {
            "zookeeper.connect": "zk1:2181",
            "group.id": "grp",
            "zookeeper.session.timeout.ms": "6500",
            "consumer.timeout.ms": "-1",
            "fetch.min.bytes": " 42 ",
            "auto.commit.enable": "FALSE",
            "exclude.internal.topics": "True",
            "metrics.port": "+9404",
            "auto.offset.reset": " smallest ",
            "ssl.check.hostname": "false",
        }
    )
    assert c.zookeeper_session_timeout_ms == 6500
    assert c.consumer_timeout_ms == -1
    assert c.fetch_min_bytes == 42
    assert c.auto_commit_enable is False
    assert c.exclude_internal_topics is True
    assert c.metrics_port == 9404
    assert c.auto_offset_reset == "smallest"
    assert c.ssl_check_hostname is False


def test_python_values_are_accepted() -> None:
    c = cfg(auto_commit_enable=False, socket_timeout_ms=1000, metrics_port=0)
    assert c.auto_commit_enable is False
    assert c.socket_timeout_ms == 1000
    assert c.metrics_port == 0


@pytest.mark.parametrize("value", [True, False, 1.5, "1.5", "0x10", "1_000", "", "ten", None])
def test_int_rejects(value: object) -> None:
    if value is None:  # None means "not given": the default applies
        assert cfg(socket_timeout_ms=None).socket_timeout_ms == 30000
        return
    msg = config_error(with_min(socket__timeout__ms=value))
    assert msg == f"socket.timeout.ms={value!r} is not an integer"


def test_int_error_message_exact() -> None:
    msg = config_error({**MIN, "socket.timeout.ms": "abc"})
    assert msg == "socket.timeout.ms='abc' is not an integer"


@pytest.mark.parametrize("value", ["yes", "1", 1, 0, "", "on"])
def test_bool_rejects(value: object) -> None:
    msg = config_error({**MIN, "auto.commit.enable": value})
    assert msg == f"auto.commit.enable={value!r} is not a boolean (true or false)"


def test_str_rejects_non_strings() -> None:
    msg = config_error({**MIN, "group.id": 42})
    assert msg == "group.id=42 is not a string"


def test_none_and_empty_mean_unset_for_unset_or_derived_keys() -> None:
    c = ConsumerConfig(
        {**MIN, "metrics.port": "", "consumer.id": "  ", "client.id": "", "ssl.cafile": None}
    )
    assert c.metrics_port is None
    assert c.consumer_id is None
    assert c.client_id == "grp"
    assert c.ssl_cafile is None


def test_empty_value_of_a_key_with_a_default_is_an_error() -> None:
    assert config_error({**MIN, "fetch.min.bytes": ""}) == "fetch.min.bytes='' is not an integer"
    assert (
        config_error({**MIN, "sasl.kerberos.service.name": " "})
        == "sasl.kerberos.service.name=' ' is empty"
    )


# ---------------------------------------------------------------------------------------
# Ranges


@pytest.mark.parametrize(
    ("key", "lowest"),
    [
        ("zookeeper.session.timeout.ms", 1),
        ("zookeeper.connection.timeout.ms", 1),
        ("zookeeper.sync.time.ms", 0),
        ("socket.timeout.ms", 100),  # lowest allowed with fetch.wait.max.ms=100
        ("socket.receive.buffer.bytes", -1),
        ("fetch.message.max.bytes", 1),
        ("num.consumer.fetchers", 1),
        ("fetch.min.bytes", 0),
        ("fetch.wait.max.ms", 0),
        ("queued.max.message.chunks", 1),
        ("auto.commit.interval.ms", 1),
        ("consumer.timeout.ms", -1),
        ("rebalance.max.retries", 1),
        ("rebalance.backoff.ms", 0),
        ("refresh.leader.backoff.ms", 0),
        ("offsets.channel.backoff.ms", 0),
        ("offsets.channel.socket.timeout.ms", 1),
        ("offsets.commit.max.retries", 0),
        ("metrics.port", 0),
    ],
)
def test_lowest_value_accepted_and_one_below_rejected(key: str, lowest: int) -> None:
    assert ConsumerConfig({**MIN, key: lowest}).get(key) == lowest
    assert ConsumerConfig({**MIN, key: str(lowest)}).get(key) == lowest
    if key == "socket.timeout.ms":
        lowest = 1
    below = lowest - 1
    msg = config_error({**MIN, key: str(below)})
    assert msg.startswith(f"{key}='{below}' is out of range: must be ")
    assert str(lowest) in msg


def test_range_messages_exact() -> None:
    assert (
        config_error({**MIN, "consumer.timeout.ms": -2})
        == "consumer.timeout.ms=-2 is out of range: must be between -1 and 2147483647"
    )
    assert (
        config_error({**MIN, "metrics.port": 65536})
        == "metrics.port=65536 is out of range: must be between 0 and 65535"
    )
    assert (
        config_error({**MIN, "socket.timeout.ms": "2147483648"})
        == "socket.timeout.ms='2147483648' is out of range: must be between 1 and 2147483647"
    )


def test_fetch_wait_must_not_exceed_socket_timeout() -> None:
    msg = config_error({**MIN, "fetch.wait.max.ms": 500, "socket.timeout.ms": 400})
    assert msg == (
        "fetch.wait.max.ms=500 is greater than socket.timeout.ms=400: "
        "socket.timeout.ms must be at least fetch.wait.max.ms"
    )
    c = cfg(fetch_wait_max_ms=400, socket_timeout_ms=400)
    assert (c.fetch_wait_max_ms, c.socket_timeout_ms) == (400, 400)
    # Against the default socket timeout too.
    assert "socket.timeout.ms=30000" in config_error({**MIN, "fetch.wait.max.ms": 30001})


# ---------------------------------------------------------------------------------------
# Enums


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("auto.offset.reset", "smalest", "smallest, largest"),
        ("auto.offset.reset", "LARGEST", "smallest, largest"),
        ("partition.assignment.strategy", "cooperative-sticky", "range, roundrobin, sticky"),
        ("offsets.storage", "redis", "zookeeper, kafka"),
        ("fetch.backend", "librdkafka", "kafka-python, confluent"),
        ("security.protocol", "TLS", "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ("sasl.mechanism", "NTLM", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER"),
    ],
)
def test_bad_enum_values_list_the_allowed_ones(key: str, value: str, allowed: str) -> None:
    assert config_error({**MIN, key: value}) == f"{key}={value!r} is not one of: {allowed}"


def test_modern_auto_offset_reset_value_gets_a_hint() -> None:
    assert config_error({**MIN, "auto.offset.reset": "earliest"}) == (
        "auto.offset.reset='earliest' is not one of: smallest, largest "
        "(the legacy consumer calls it 'smallest')"
    )


def test_case_insensitive_enums_are_normalised() -> None:
    c = cfg(offsets_storage="ZooKeeper", security_protocol="ssl")
    assert c.offsets_storage == "zookeeper"
    assert c.security_protocol == "SSL"
    c = ConsumerConfig({**MIN, "partition.assignment.strategy": "roundrobin"})
    assert c.partition_assignment_strategy == "roundrobin"
    c = ConsumerConfig({**MIN, "partition.assignment.strategy": "sticky"})
    assert c.partition_assignment_strategy == "sticky"
    assert ConsumerConfig({**MIN, "fetch.backend": "kafka-python"}).fetch_backend == "kafka-python"


# ---------------------------------------------------------------------------------------
# Identifiers


@pytest.mark.parametrize("group", ["a", "A-z_0.9", "console-consumer-12345", "..a", "_"])
def test_legal_group_ids(group: str) -> None:
    c = ConsumerConfig({"zookeeper.connect": "zk:2181", "group.id": group})
    assert (c.group_id, c.client_id) == (group, group)


@pytest.mark.parametrize("group", ["my group", "g/1", "grüppe", "a,b", "a*", ".", ".."])
def test_illegal_group_ids(group: str) -> None:
    msg = config_error({"zookeeper.connect": "zk:2181", "group.id": group})
    assert msg.startswith(f"group.id={group!r} ")
    assert "client.id" not in msg  # the derived client.id is not reported again


def test_illegal_group_id_message_exact() -> None:
    assert config_error({**MIN, "group.id": "my group/x"}) == (
        "group.id='my group/x' contains illegal characters (' ', '/'); legal are a-z A-Z 0-9 . _ -"
    )


def test_illegal_client_id() -> None:
    assert config_error({**MIN, "client.id": "my client"}) == (
        "client.id='my client' contains illegal characters (' '); legal are a-z A-Z 0-9 . _ -"
    )


def test_consumer_id() -> None:
    assert cfg(consumer_id="host-1").consumer_id == "host-1"
    msg = config_error({**MIN, "consumer.id": "a/b"})
    assert msg.startswith("consumer.id='a/b' cannot contain '/'")


def test_missing_required_keys() -> None:
    assert config_error({"group.id": "g"}) == (
        "missing required configuration key 'zookeeper.connect'"
    )
    assert config_error({"zookeeper.connect": "zk:2181"}) == (
        "missing required configuration key 'group.id'"
    )
    assert config_error({**MIN, "group.id": None}) == (
        "missing required configuration key 'group.id'"
    )
    assert config_error({**MIN, "group.id": " "}) == "group.id=' ' is empty; it is required"


# ---------------------------------------------------------------------------------------
# zookeeper.connect


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot"),
    [
        ("zk1:2181", "zk1:2181", ""),
        ("zk1", "zk1", ""),
        ("h1:2181,h2:2181/kafka", "h1:2181,h2:2181", "/kafka"),
        ("h1:2181,h2:2181/kafka/", "h1:2181,h2:2181", "/kafka"),
        ("h1:2181/", "h1:2181", ""),
        ("h1:2181/a/b/c", "h1:2181", "/a/b/c"),
        (" h1:2181 , h2 /kafka ", "h1:2181,h2", "/kafka"),
        ("10.0.0.1:2181,[::1]:2182", "10.0.0.1:2181,[::1]:2182", ""),
        ("zk-1.example.com:65535", "zk-1.example.com:65535", ""),
    ],
)
def test_zk_connect_parsing(connect: str, hosts: str, chroot: str) -> None:
    c = ConsumerConfig({"zookeeper.connect": connect, "group.id": "g"})
    assert c.zk_hosts == hosts
    assert c.zk_chroot == chroot
    assert c.zookeeper_connect == hosts + chroot


@pytest.mark.parametrize(
    ("connect", "reason"),
    [
        ("", "is empty; it is required"),
        ("/kafka", "has an empty host entry (number 1)"),
        ("h1:2181,,h2:2181", "has an empty host entry (number 2)"),
        ("h1:0", "has an invalid entry 'h1:0': invalid port '0' (must be 1..65535)"),
        ("h1:65536", "has an invalid entry 'h1:65536': invalid port '65536' (must be 1..65535)"),
        ("h1:abc", "has an invalid entry 'h1:abc': invalid port 'abc'"),
        ("h1:", "has an invalid entry 'h1:': empty port"),
        ("h 1:2181", "has an invalid entry 'h 1:2181': invalid host name 'h 1'"),
        ("h1:2181:2182", "has an invalid entry 'h1:2181:2182': not host[:port]"),
        ("[zz]:2181", "has an invalid entry '[zz]:2181': malformed IPv6 address"),
        ("[::1]x", "has an invalid entry '[::1]x': not host[:port]"),
        ("h1:2181/a//b", "has an invalid chroot path '/a//b'"),
        ("h1:2181/a/../b", "has an invalid chroot path '/a/../b'"),
        ("[::1:2181", "unterminated '['"),
    ],
)
def test_bad_zk_connect(connect: str, reason: str) -> None:
    msg = config_error({"zookeeper.connect": connect, "group.id": "g"})
    assert msg.startswith(f"zookeeper.connect={connect!r} ")
    assert reason in msg


# ---------------------------------------------------------------------------------------
# Unknown keys and several problems


def test_unknown_key_with_did_you_mean() -> None:
    assert config_error({**MIN, "auto.comit.enable": "true"}) == (
        "unknown configuration key 'auto.comit.enable' (did you mean 'auto.commit.enable'?)"
    )


def test_unknown_key_with_underscores_suggests_the_dotted_key() -> None:
    msg = config_error({**MIN, "rebalance_max_retries": 3})
    assert msg == (
        "unknown configuration key 'rebalance_max_retries' (did you mean 'rebalance.max.retries'?)"
    )


def test_unknown_modern_key_names_the_legacy_one() -> None:
    assert config_error({**MIN, "enable.auto.commit": "false"}) == (
        "unknown configuration key 'enable.auto.commit' (the legacy name is 'auto.commit.enable')"
    )


def test_unknown_key_without_a_close_match() -> None:
    assert config_error({**MIN, "xyzzy": 1}) == "unknown configuration key 'xyzzy'"


def test_non_string_key() -> None:
    assert config_error({**MIN, 5: 1}) == "configuration keys must be strings, got 5"  # type: ignore[dict-item]


def test_keys_are_stripped() -> None:
    assert ConsumerConfig({" zookeeper.connect ": "zk:1", "group.id ": "g"}).zk_hosts == "zk:1"


def test_all_problems_reported_at_once() -> None:
    msg = config_error(
        {
            "group.id": "bad id",
            "auto.comit.enable": "true",
            "socket.timeout.ms": "abc",
            "auto.offset.reset": "earliest",
            "num.consumer.fetchers": 0,
        }
    )
    assert msg.splitlines() == [
        "6 configuration problems:",
        "  unknown configuration key 'auto.comit.enable' (did you mean 'auto.commit.enable'?)",
        "  missing required configuration key 'zookeeper.connect'",
        "  group.id='bad id' contains illegal characters (' '); legal are a-z A-Z 0-9 . _ -",
        "  socket.timeout.ms='abc' is not an integer",
        "  num.consumer.fetchers=0 is out of range: must be between 1 and 2147483647",
        "  auto.offset.reset='earliest' is not one of: smallest, largest "
        "(the legacy consumer calls it 'smallest')",
    ]


def test_config_error_is_a_value_error_and_a_zkconsumer_error() -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig({})
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ZkConsumerError)
    assert str(info.value).splitlines() == [
        "2 configuration problems:",
        "  missing required configuration key 'zookeeper.connect'",
        "  missing required configuration key 'group.id'",
    ]


# ---------------------------------------------------------------------------------------
# Security settings, secrets, kafka-python keywords


def test_kafka_client_kwargs_defaults() -> None:
    assert ConsumerConfig(MIN).kafka_client_kwargs() == {
        "client_id": "grp",
        "security_protocol": "PLAINTEXT",
        "ssl_check_hostname": True,
        "sasl_kerberos_service_name": "kafka",
    }


def test_kafka_client_kwargs_all_set() -> None:
    c = ConsumerConfig(
        {
            **MIN,
            "client.id": "cli",
            "security.protocol": "SASL_SSL",
            "ssl.cafile": "/etc/ca.pem",
            "ssl.certfile": "/etc/cert.pem",
            "ssl.keyfile": "/etc/key.pem",
            "ssl.password": "keypw",
            "ssl.check.hostname": "false",
            "sasl.mechanism": "scram-sha-512",
            "sasl.plain.username": "alice",
            "sasl.plain.password": "s3cret",
            "sasl.kerberos.service.name": "kfk",
            "bootstrap.servers": "b1:9092, b2:9093",
        }
    )
    assert c.kafka_client_kwargs() == {
        "client_id": "cli",
        "security_protocol": "SASL_SSL",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/cert.pem",
        "ssl_keyfile": "/etc/key.pem",
        "ssl_password": "keypw",
        "ssl_check_hostname": False,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret",
        "sasl_kerberos_service_name": "kfk",
    }
    assert c.bootstrap_servers == "b1:9092,b2:9093"


def test_kafka_client_kwargs_are_accepted_by_kafka_python() -> None:
    kafka = pytest.importorskip("kafka")
    kwargs = cfg(security_protocol="SSL").kafka_client_kwargs()
    assert set(kwargs) <= set(kafka.KafkaConsumer.DEFAULT_CONFIG)


def test_sasl_protocol_needs_a_mechanism() -> None:
    assert config_error({**MIN, "security.protocol": "SASL_PLAINTEXT"}) == (
        "security.protocol='SASL_PLAINTEXT' needs sasl.mechanism "
        "(one of: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER)"
    )


def test_plain_and_scram_need_username_and_password() -> None:
    msg = config_error({**MIN, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    assert msg.splitlines() == [
        "2 configuration problems:",
        "  sasl.mechanism='PLAIN' with security.protocol='SASL_SSL' needs sasl.plain.username",
        "  sasl.mechanism='PLAIN' with security.protocol='SASL_SSL' needs sasl.plain.password",
    ]
    c = cfg(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
    assert c.sasl_mechanism == "GSSAPI"


def test_a_client_key_needs_its_certificate() -> None:
    """Alone, both clients would ignore the key: mutual TLS would fail at the handshake."""
    assert config_error({**MIN, "ssl.keyfile": "/etc/client.key"}) == (
        "ssl.keyfile needs ssl.certfile (the client certificate it is for)")
    assert config_error({**MIN, "ssl.password": "pw"}) == (
        "ssl.password needs ssl.certfile (the client certificate it is for)")
    c = cfg(ssl_certfile="/etc/client.pem", ssl_keyfile="/etc/client.key", ssl_password="pw")
    assert c.ssl_keyfile == "/etc/client.key"


SECRETS: dict[str, object] = {
    **MIN,
    "ssl.certfile": "/etc/client.pem",
    "ssl.password": "key-pass-1",
    "sasl.plain.password": "sasl-pass-2",
    "sasl.plain.username": "alice",
    "zookeeper.auth": "digest:bob:zk-pass-3,sasl:carol:zk-pass-4",
}


def test_secrets_are_redacted_in_repr_and_str() -> None:
    c = ConsumerConfig(SECRETS)
    for text in (repr(c), str(c)):
        for secret in ("key-pass-1", "sasl-pass-2", "zk-pass-3", "zk-pass-4", "bob", "carol"):
            assert secret not in text
        assert "******" in text
        assert "alice" in text
    assert "'zookeeper.auth': 'digest:******,sasl:******'" in repr(c)
    assert "'ssl.password': '******'" in repr(c)
    assert repr(c).startswith("ConsumerConfig({'zookeeper.connect': 'zk1:2181', ")
    assert "sasl.plain.password=******" in str(c).splitlines()


def test_as_properties_redacts_by_default() -> None:
    c = ConsumerConfig(SECRETS)
    redacted = c.as_properties()
    assert redacted["ssl.password"] == "******"
    assert redacted["sasl.plain.password"] == "******"
    assert redacted["zookeeper.auth"] == "digest:******,sasl:******"
    assert redacted["sasl.plain.username"] == "alice"
    clear = c.as_properties(redact=False)
    assert clear["ssl.password"] == "key-pass-1"
    assert clear["zookeeper.auth"] == "digest:bob:zk-pass-3,sasl:carol:zk-pass-4"
    # The credentials themselves are still usable.
    assert c.ssl_password == "key-pass-1"
    assert c.zk_auth_data == [("digest", "bob:zk-pass-3")]
    assert c.zk_sasl == ZkSaslLogin("carol", "zk-pass-4")


def test_secret_values_are_redacted_in_error_messages() -> None:
    msg = config_error({**MIN, "ssl.password": 12345})
    assert msg == "ssl.password='******' is not a string"
    msg = config_error({**MIN, "zookeeper.auth": "digest:u:p,nocolon-secret"})
    assert "nocolon-secret" not in msg
    assert msg == (
        "zookeeper.auth='digest:******,******' entry 2 is not scheme:credential "
        "(e.g. digest:user:password)"
    )


def test_as_properties_defaults_java_style() -> None:
    props = ConsumerConfig(MIN).as_properties()
    expected = {k: v for k, v in ALL_DEFAULTS.items() if v is not None}
    assert list(props) == list(expected)
    assert props["auto.commit.enable"] == "true"
    assert props["dual.commit.enabled"] == "false"
    assert props["consumer.timeout.ms"] == "-1"
    assert all(isinstance(v, str) for v in props.values())


def test_as_properties_round_trips() -> None:
    c = ConsumerConfig({**SECRETS, "metrics.port": 9000, "offsets.storage": "kafka"})
    again = ConsumerConfig(c.as_properties(redact=False))
    assert again == c
    assert hash(again) == hash(c)
    assert again != ConsumerConfig(MIN)


# ---------------------------------------------------------------------------------------
# ZooKeeper auth and ACL


def test_zookeeper_acl_parsing() -> None:
    c = cfg(zookeeper_acl="digest:user:HASH=:cdrwa, world:anyone:r,creator,ip:10.0.0.1:rw")
    assert c.zk_acl == [
        ZkAcl("digest", "user:HASH=", "cdrwa"),
        ZkAcl("world", "anyone", "r"),
        ZkAcl("auth", "", "cdrwa"),
        ZkAcl("ip", "10.0.0.1", "rw"),
    ]
    assert [a.perms_mask for a in c.zk_acl] == [31, 1, 31, 3]
    assert ConsumerConfig(MIN).zk_acl == []


@pytest.mark.parametrize(
    ("acl", "reason"),
    [
        ("world:anyone", "entry 1: 'world:anyone' is not scheme:id:perms or 'creator'"),
        ("world:anyone:rx", "entry 1: 'world:anyone:rx' has invalid permissions 'rx'"),
        ("world:anyone:rr", "entry 1: 'world:anyone:rr' has invalid permissions 'rr'"),
        ("world:anyone:", "entry 1: 'world:anyone:' has invalid permissions ''"),
        ("creator,world:someone:r", "entry 2: 'world:someone:r': the world scheme"),
        ("digest:user:r", "entry 1: 'digest:user:r': a digest id is user:base64-hash"),
        ("di gest:u:h:r", "entry 1: 'di gest:u:h:r' has an invalid scheme 'di gest'"),
        ("ip::r", "entry 1: 'ip::r' has an empty id"),
    ],
)
def test_bad_zookeeper_acl(acl: str, reason: str) -> None:
    msg = config_error({**MIN, "zookeeper.acl": acl})
    assert msg.startswith(f"zookeeper.acl={acl!r} {reason}")


@pytest.mark.parametrize("auth", ["digest", "digest:", ":cred", "digest:u:p,", "sasl:"])
def test_bad_zookeeper_auth(auth: str) -> None:
    msg = config_error({**MIN, "zookeeper.auth": auth})
    assert msg.startswith("zookeeper.auth=")
    assert "is not scheme:credential" in msg


@pytest.mark.parametrize("auth", ["digest:user", "digest:user:", "digest::pw"])
def test_digest_auth_needs_user_and_password(auth: str) -> None:
    msg = config_error({**MIN, "zookeeper.auth": auth})
    assert msg.endswith("entry 1 is not digest:user:password"), msg
    assert "user" not in msg.split("=", 1)[1].split(" ")[0] or "******" in msg  # redacted


def test_zookeeper_auth_sasl() -> None:
    c = cfg(zookeeper_auth="digest:bob:pw1, sasl:zkc:pa:ss")
    assert c.zk_sasl == ZkSaslLogin("zkc", "pa:ss")  # the password may hold ':'
    assert c.zk_sasl.mechanism == "DIGEST-MD5"
    assert "pa:ss" not in repr(c.zk_sasl)
    assert c.zk_auth_data == [("digest", "bob:pw1")]
    assert repr(c) == (
        "ConsumerConfig({'zookeeper.connect': 'zk1:2181', 'group.id': 'grp', "
        "'zookeeper.auth': 'digest:******,sasl:******'})"
    )
    only = cfg(zookeeper_auth="sasl:zkc:secret")
    assert (only.zk_sasl, only.zk_auth_data) == (ZkSaslLogin("zkc", "secret"), [])
    assert ConsumerConfig(MIN).zk_sasl is None


@pytest.mark.parametrize(
    ("auth", "reason"),
    [
        ("sasl:zkc", "entry 1 is not sasl:user:password"),
        ("sasl:zkc:", "entry 1 is not sasl:user:password"),
        ("digest:u:p,sasl::secret", "entry 2 is not sasl:user:password"),
        ("sasl:a:p1,sasl:b:p2", "entry 2 is a second sasl entry"),
    ],
)
def test_bad_zookeeper_auth_sasl(auth: str, reason: str) -> None:
    msg = config_error({**MIN, "zookeeper.auth": auth})
    assert msg.startswith("zookeeper.auth='"), msg
    assert reason in msg
    for secret in ("zkc", "secret", "p1", "p2"):
        assert secret not in msg
    if "not sasl:user:password" in reason:
        assert msg.endswith("(SASL DIGEST-MD5; Kerberos/GSSAPI is not supported)")


def test_bootstrap_servers_validation() -> None:
    assert cfg(bootstrap_servers="b1:9092").bootstrap_servers == "b1:9092"
    msg = config_error({**MIN, "bootstrap.servers": "b1:9092,b2:x"})
    assert msg == (
        "bootstrap.servers='b1:9092,b2:x' has an invalid entry 'b2:x': "
        "invalid port 'x' (must be 1..65535)"
    )
    assert config_error({**MIN, "bootstrap.servers": "b1,,b2"}) == (
        "bootstrap.servers='b1,,b2' has an empty entry (number 2); expected host[:port],..."
    )


# ---------------------------------------------------------------------------------------
# copy_with and is_given


def test_copy_with_rederives_defaults() -> None:
    c = ConsumerConfig(MIN)
    d = c.copy_with({"group.id": "other", "zookeeper.sync.time.ms": 300})
    assert (d.group_id, d.client_id, d.rebalance_backoff_ms) == ("other", "other", 300)
    assert (c.group_id, c.client_id) == ("grp", "grp")


def test_copy_with_keeps_explicit_values_and_none_removes_them() -> None:
    c = ConsumerConfig({**MIN, "client.id": "cli", "socket.timeout.ms": 5000})
    d = c.copy_with({"group.id": "other"})
    assert (d.client_id, d.socket_timeout_ms) == ("cli", 5000)
    e = d.copy_with({"client.id": None})
    assert e.client_id == "other"


def test_copy_with_validates() -> None:
    with pytest.raises(ConfigError, match=r"socket\.timeout\.ms='x' is not an integer"):
        ConsumerConfig(MIN).copy_with({"socket.timeout.ms": "x"})


def test_is_given() -> None:
    c = ConsumerConfig({**MIN, "fetch.min.bytes": 1})
    assert c.is_given("fetch.min.bytes")
    assert not c.is_given("client.id")
    with pytest.raises(KeyError):
        c.is_given("nope")


# ---------------------------------------------------------------------------------------
# Properties files

PROPS_FILE = """\
# A consumer.properties written for the JVM consumer
! also a comment
   # indented comment

zookeeper.connect=zk1:2181,zk2:2181/kafka
group.id : orders
socket.timeout.ms   40000
auto.commit.enable=TRUE
auto.offset.reset = smallest   \n\
consumer.id = host\\u002d1
client.id = orders\\
    -client
sasl.plain.password = pa\\tss\\\\word\\ \n\
ssl.cafile=C\\:\\\\certs\\\\ca.pem
# a comment ending in a backslash is not continued \\
fetch.min.bytes=7
"""


def write(tmp_path: Path, text: str, name: str = "consumer.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_from_properties(tmp_path: Path) -> None:
    c = ConsumerConfig.from_properties(write(tmp_path, PROPS_FILE))
    assert c.zk_hosts == "zk1:2181,zk2:2181"
    assert c.zk_chroot == "/kafka"
    assert c.group_id == "orders"
    assert c.socket_timeout_ms == 40000
    assert c.auto_commit_enable is True
    assert c.auto_offset_reset == "smallest"
    assert c.consumer_id == "host-1"
    assert c.client_id == "orders-client"
    assert c.sasl_plain_password == "pa\tss\\word "
    assert c.ssl_cafile == "C:\\certs\\ca.pem"
    assert c.fetch_min_bytes == 7


def test_read_properties_raw(tmp_path: Path) -> None:
    text = "a=1\r\nb:2\rc 3\nd\\=x = y\ne=\nmulti = one \\\n  two \\\n  three\n"
    assert read_properties(write(tmp_path, text)) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d=x": "y",
        "e": "",
        "multi": "one two three",
    }


def test_read_properties_unicode_and_latin1(tmp_path: Path) -> None:
    assert read_properties(write(tmp_path, "k=caf\\u00e9 \u00e9")) == {"k": "caf\u00e9 \u00e9"}
    path = tmp_path / "latin1.properties"
    path.write_bytes("k=\u00e9t\u00e9\n".encode("latin-1"))
    assert read_properties(path) == {"k": "\u00e9t\u00e9"}


def test_from_properties_overrides_win(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.connect=zk:2181\ngroup.id=a\nsocket.timeout.ms=bad\n")
    c = ConsumerConfig.from_properties(path, {"group.id": "b", "socket.timeout.ms": 1000})
    assert (c.group_id, c.client_id, c.socket_timeout_ms) == ("b", "b", 1000)


def test_from_properties_value_errors_name_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# header\nzookeeper.connect=zk:2181\ngroup.id=g\n\nsocket.timeout.ms=abc\n",
    )
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_properties(path)
    assert str(info.value) == f"{path}:5: socket.timeout.ms='abc' is not an integer"


def test_from_properties_bad_lines_and_values_all_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "zookeeper.connect=zk:2181\n"
        "group.id=g\n"
        "client.id=bad\\u12\n"
        "just-a-word\n"
        "=value-without-key\n"
        "auto.comit.enable=false\n",
    )
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_properties(path)
    assert str(info.value).splitlines() == [
        f"4 configuration problems in {path}:",
        f"  {path}:3: malformed \\uxxxx escape '\\\\u12'",
        f"  {path}:4: 'just-a-word' is not key=value",
        f"  {path}:5: no key before the separator in '=value-without-key'",
        f"  {path}:6: unknown configuration key 'auto.comit.enable' "
        "(did you mean 'auto.commit.enable'?)",
    ]


def test_from_properties_line_number_of_a_continued_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "zookeeper.connect=zk1:2181,\\\n    zk2:2181\ngroup.id=g\nnum.consumer.fetchers=\\\n 0\n",
    )
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_properties(path)
    assert str(info.value) == (
        f"{path}:4: num.consumer.fetchers='0' is out of range: must be between 1 and 2147483647"
    )


def test_from_properties_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match="cannot read properties file .*nope.properties"):
        ConsumerConfig.from_properties(path)


def test_from_properties_missing_required_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_properties(write(tmp_path, "group.id=g\n"))
    assert str(info.value) == "missing required configuration key 'zookeeper.connect'"


# ---------------------------------------------------------------------------------------
# Documentation table


def test_config_table_markdown_has_every_key_once() -> None:
    table = config_table_markdown()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == len(ALL_DEFAULTS)
    names = [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    assert names == list(ALL_DEFAULTS)
    assert table.splitlines()[0] == "| key | type | default | valid values | description |"


def test_config_table_markdown_rows() -> None:
    rows = {
        re.match(r"\| `([^`]+)`", line).group(1): line  # type: ignore[union-attr]
        for line in config_table_markdown().splitlines()
        if line.startswith("| `")
    }
    assert rows["zookeeper.session.timeout.ms"].startswith(
        "| `zookeeper.session.timeout.ms` | int | `6000` | >= 1 |"
    )
    assert "| = zookeeper.session.timeout.ms |" in rows["zookeeper.connection.timeout.ms"]
    assert "| = group.id |" in rows["client.id"]
    assert "| required |" in rows["group.id"]
    assert "| true iff offsets.storage is kafka |" in rows["dual.commit.enabled"]
    assert "| `smallest`, `largest` |" in rows["auto.offset.reset"]
    assert "| unset | 0..65535 |" in rows["metrics.port"]
    for key in LEGACY_DEFAULTS:
        assert "zkconsumer extension" not in rows[key], key
    for key in EXTENSION_DEFAULTS:
        assert rows[key].endswith("*zkconsumer extension.* |"), key
    for row in rows.values():
        assert row.count(" | ") == 4 + row.count("\\|"), row


def test_a_socket_buffer_of_minus_one_is_the_os_default_as_in_the_original() -> None:
    from zkconsumer.broker.clients import confluent_conf, kafka_python_kwargs

    config = ConsumerConfig({"zookeeper.connect": "zk:2181", "group.id": "g",
                             "socket.receive.buffer.bytes": "-1"})
    assert config.socket_receive_buffer_bytes == -1
    assert kafka_python_kwargs(config, ["b:9092"])["receive_buffer_bytes"] is None
    assert confluent_conf(config, ["b:9092"], "c")["socket.receive.buffer.bytes"] == 0
    with pytest.raises(ConfigError):
        ConsumerConfig({"zookeeper.connect": "zk:2181", "group.id": "g",
                        "socket.receive.buffer.bytes": "-2"})
