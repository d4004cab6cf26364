"""ZooKeeper authentication and ACLs: what the connector creates, others cannot tamper with."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl_credential

from tests.support import NullFetcher, group_owners, started_zk, wait_until
from zkconsumer import ConsumerConfig, TopicPartition, ZkConsumerError, ZookeeperConsumerConnector
from zkconsumer import _zkpaths as zp
from zkconsumer._connector import check_kazoo_login, kazoo_security_kwargs
from zkconsumer._stack import LocalStack, free_port


def test_digest_acl_protects_created_znodes(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 2)
    user, password = "zkc", "s3cret-pw"
    digest = make_digest_acl_credential(user, password)  # "user:base64(sha1)"
    config = ConsumerConfig({
        "zookeeper.connect": stack.zookeeper, "group.id": names.group,
        "zookeeper.auth": f"digest:{user}:{password}",
        "zookeeper.acl": f"digest:{digest}:cdrwa,world:anyone:r",
        "auto.commit.enable": "false",
    })
    assert password not in repr(config)
    c = ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher)
    try:
        c.create_message_streams({topic: 1})
        owners = group_owners(zk, names.group, topic)  # world-readable
        assert sorted(owners) == [0, 1]
        for path in (zp.id_path(names.group, c.consumer_id), zp.owner_path(names.group, topic, 0),
                     zp.ids_dir(names.group)):
            acls, _ = zk.get_acls(path)
            # ZooKeeper shows a digest id's hash only to authenticated clients ("zkc:x")
            assert {(a.id.scheme, a.id.id.split(":")[0], a.perms) for a in acls} == {
                ("digest", user, 31), ("world", "anyone", 1)}
        # `zk` has no credentials: reading works, changing does not
        with pytest.raises(NoAuthError):
            zk.delete(zp.owner_path(names.group, topic, 0))
        with pytest.raises(NoAuthError):
            zk.set(zp.id_path(names.group, c.consumer_id), b"garbage")
        with pytest.raises(NoAuthError):
            zk.create(zp.owner_path(names.group, topic, 5), b"intruder")
        c.commit_offsets()
    finally:
        c.shutdown()


# ---------------------------------------------------------------------------------------
# SASL (DIGEST-MD5) against a private ZooKeeper that serves it

SASL_USER, SASL_PASSWORD = "zkc", "secret"
_JAAS = f"""Server {{
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_{SASL_USER}="{SASL_PASSWORD}";
}};
"""


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a ZooKeeper of its own with SASL DIGEST-MD5 logins (zkc/secret).

    The JAAS ``Server`` section enables the SASL exchange; the SASL authentication
    provider lets ACLs name ``sasl:<user>``. Clients without a login stay welcome
    (ZooKeeper does not require SASL unless told to).
    """
    d = tmp_path_factory.mktemp("sasl-zk")
    jaas = d / "jaas.conf"
    jaas.write_text(_JAAS)
    server = LocalStack(
        d,
        zk_config=["authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"],
        zk_jvm_options=[f"-Djava.security.auth.login.config={jaas}"],
    )
    server.zk_port = free_port()
    try:
        server.start("zookeeper", timeout=60)
        yield server.zookeeper
    finally:
        server.down()


@pytest.fixture
def anonymous_zk(sasl_zookeeper: str) -> Iterator[KazooClient]:
    with started_zk(sasl_zookeeper) as client:
        yield client


def _register_topic(zk: KazooClient, topic: str, partitions: int) -> None:
    """What a broker and the bridge would write: one broker, the topic's assignment."""
    broker = zp.BrokerRegistration(
        1, ["PLAINTEXT://127.0.0.1:9"], "127.0.0.1", 9, timestamp_ms=0,
    )
    zk.ensure_path(zp.broker_path(1))
    zk.set(zp.broker_path(1), broker.encode())
    zk.create(
        zp.topic_path(topic),
        zp.TopicAssignment({p: [1] for p in range(partitions)}).encode(),
        makepath=True,
    )


def _sasl_config(zookeeper: str, group: str, password: str = SASL_PASSWORD) -> ConsumerConfig:
    return ConsumerConfig({
        "zookeeper.connect": zookeeper, "group.id": group,
        "zookeeper.auth": f"sasl:{SASL_USER}:{password}",
        "zookeeper.acl": f"sasl:{SASL_USER}:cdrwa,world:anyone:r",
        "auto.commit.enable": "false",
        "zookeeper.connection.timeout.ms": 10000,
    })


def test_sasl_acl_protects_created_znodes(sasl_zookeeper, anonymous_zk, names) -> None:
    zk = anonymous_zk
    topic = names.topic
    _register_topic(zk, topic, 2)
    config = _sasl_config(sasl_zookeeper, names.group)
    assert SASL_PASSWORD not in repr(config)
    assert SASL_PASSWORD not in repr(config.zk_sasl)
    c = ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher)
    try:
        c.create_message_streams({topic: 1})
        wait_until(lambda: sorted(group_owners(zk, names.group, topic)) == [0, 1],
                   timeout=15, what="both partitions owned")
        # The connector made /consumers on this fresh server: it stays open to other groups.
        acls, _ = zk.get_acls(zp.CONSUMERS)
        assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {("world", "anyone", 31)}
        # An offset znode, as after consuming partition 0 up to offset 5.
        c.partition_infos()[TopicPartition(topic, 0)].reset_consumed_offset(5)
        c.commit_offsets()
        offset = zp.offset_path(names.group, topic, 0)
        assert zp.decode_offset(zk.get(offset)[0]) == 5  # world-readable
        for path in (zp.ids_dir(names.group), zp.id_path(names.group, c.consumer_id),
                     zp.owner_path(names.group, topic, 0), offset):
            acls, _ = zk.get_acls(path)
            assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
                ("sasl", SASL_USER, 31), ("world", "anyone", 1)}, path
        # `zk` has no login: reading works, changing does not
        with pytest.raises(NoAuthError):
            zk.delete(zp.owner_path(names.group, topic, 0))
        with pytest.raises(NoAuthError):
            zk.set(zp.id_path(names.group, c.consumer_id), b"garbage")
        with pytest.raises(NoAuthError):
            zk.set(offset, b"0")
        with pytest.raises(NoAuthError):
            zk.create(zp.owner_path(names.group, topic, 5), b"intruder")
        c.commit_offsets()  # the owner still can
    finally:
        c.shutdown()


def test_sasl_wrong_password_fails_at_construction(sasl_zookeeper, anonymous_zk, names) -> None:
    _register_topic(anonymous_zk, names.topic, 1)
    wrong = "not-the-secret"
    config = _sasl_config(sasl_zookeeper, names.group, password=wrong)
    start = time.monotonic()
    with pytest.raises(ZkConsumerError, match="SASL login as 'zkc' .*refused") as exc:
        ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher).shutdown()
    assert wrong not in str(exc.value)
    assert time.monotonic() - start < 10  # an answer, not the connection timeout
    assert anonymous_zk.exists(zp.ids_dir(names.group)) is None  # it never registered


def test_sasl_login_refused_by_a_server_without_sasl(stack, names) -> None:
    """The session's ZooKeeper has no SASL login configured: a clear error, no hang.

    (kazoo keeps offering the login until the server expires the session: a short one.)
    """
    from zkconsumer.spark import _zk_client

    config = _sasl_config(stack.zookeeper, names.group).copy_with(
        {"zookeeper.session.timeout.ms": 2000})
    expected = r"SASL login as 'zkc' \(zookeeper.auth\) .*SASL login configured"
    with pytest.raises(ZkConsumerError, match=expected):
        _zk_client(config)
    client = KazooClient(hosts=stack.zookeeper, timeout=2.0, **kazoo_security_kwargs(config))
    client.start(timeout=15)  # kazoo reports CONNECTED before the SASL exchange
    try:
        with pytest.raises(ZkConsumerError, match=expected):
            check_kazoo_login(client, config)
    finally:
        client.stop()
        client.close()
