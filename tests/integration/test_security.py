"""ZooKeeper authentication and ACLs: what the connector and the bridge create, others cannot
tamper with."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl_credential

from tests.support import (
    NullFetcher,
    create_topic,
    group_owners,
    running_bridge,
    started_zk,
    wait_until,
)
from zkconsumer import ConsumerConfig, TopicPartition, ZkConsumerError, ZookeeperConsumerConnector
from zkconsumer.bridge import Bridge
from zkconsumer.stack.local import LocalStack, free_port
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import ACL_ENV, AUTH_ENV, check_kazoo_login, kazoo_security_kwargs


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
    from zkconsumer.spark.cluster import _zk_client

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


# ---------------------------------------------------------------------------------------
# The bridge on a secured ZooKeeper: logs in and protects what it registers, as a secured
# ZooKeeper-mode broker did (zookeeper.set.acl).

def _bridge_env(password: str = SASL_PASSWORD) -> dict[str, str]:
    return {AUTH_ENV: f"sasl:{SASL_USER}:{password}",
            ACL_ENV: f"sasl:{SASL_USER}:cdrwa,world:anyone:r"}


def test_bridge_logs_in_and_protects_its_registrations(
    stack, sasl_zookeeper, anonymous_zk, names
) -> None:
    # A chroot of its own: the bridge creates /brokers and /brokers/ids there, with its ACL
    # (deleting a znode is the parent's ACL's say; a /brokers/ids someone else made open
    # stays open, as with ZooKeeper-mode brokers).
    root = f"/secured-{names.suffix}"
    anonymous_zk.create(root)
    chrooted = f"{sasl_zookeeper}{root}"
    topic = names.topic
    create_topic(stack.bootstrap, topic, 2)
    bridge = Bridge(chrooted, stack.bootstrap, interval_s=0.2, environ=_bridge_env())
    with started_zk(chrooted) as zk:  # no login
        with running_bridge(bridge, "secured-bridge") as failed:
            state = zp.partition_state_path(topic, 1)
            # A round writes every topic of the cluster, then the broker: wait for both.
            wait_until(lambda: failed or (zk.exists(state) and zk.get_children(zp.BROKER_IDS)),
                       60, "the topic and the broker registered")
            assert not failed, failed
            [broker] = zk.get_children(zp.BROKER_IDS)
            registered = zp.broker_path(int(broker))
            assignment = zp.TopicAssignment.decode(zk.get(zp.topic_path(topic))[0])
            assert sorted(assignment.partitions) == [0, 1]  # world-readable
            for path in (zp.BROKER_IDS, registered, zp.topic_path(topic), state):
                acls, _ = zk.get_acls(path)
                assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
                    ("sasl", SASL_USER, 31), ("world", "anyone", 1)}, path
            # no login: it can neither take the broker's place nor rewrite its topic
            with pytest.raises(NoAuthError):
                zk.delete(registered)
            with pytest.raises(NoAuthError):
                zk.create(zp.broker_path(int(broker) + 1), b"{}")
            with pytest.raises(NoAuthError):
                zk.set(zp.topic_path(topic), b"{}")
            with pytest.raises(NoAuthError):
                zk.set(state, b"{}")
        assert not failed, failed
        assert zk.exists(registered) is None  # a clean stop deregisters (with its login)


def test_bridge_with_a_refused_login_stops_with_one_line(stack, sasl_zookeeper, names) -> None:
    wrong = "not-the-secret"
    env = {**os.environ, **_bridge_env(wrong)}
    proc = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "bridge", "--zookeeper", sasl_zookeeper,
         "--bootstrap-server", stack.bootstrap, "--connect-timeout", "10"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"zkconsumer bridge: SASL login as 'zkc' .*refused.*", last), last
    assert "Traceback" not in proc.stderr
    assert wrong not in proc.stderr


def test_bridge_reports_bad_settings_and_no_zookeeper(stack) -> None:
    bad = Bridge(stack.zookeeper, stack.bootstrap, environ={AUTH_ENV: "digest:user"})
    with pytest.raises(ZkConsumerError, match=f"{AUTH_ENV}: .*not digest:user:password"):
        bad.run()
    nowhere = Bridge(f"127.0.0.1:{free_port()}", stack.bootstrap, connect_timeout_s=1.0,
                     environ={})
    with pytest.raises(ZkConsumerError, match="cannot connect to ZooKeeper at .* within 1 s"):
        nowhere.run()


class _RefusedDuringStart:
    """kazoo's KazooClient whose SASL login ZooKeeper refuses before the connection is
    reported: listeners see LOST with the raw state AUTH_FAILED, and start() times out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from kazoo.protocol.states import KeeperState

        self.client_state = KeeperState.CONNECTING
        self.listeners: list[Any] = []

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)

    def _refuse(self) -> None:
        from kazoo.protocol.states import KazooState, KeeperState

        self.client_state = KeeperState.AUTH_FAILED
        for listener in list(self.listeners):
            listener(KazooState.LOST)
        self.client_state = KeeperState.CLOSED

    def start_async(self) -> threading.Event:
        self._refuse()
        return threading.Event()  # never connected

    def start(self, timeout: float) -> None:
        from kazoo.handlers.threading import KazooTimeoutError

        self._refuse()
        raise KazooTimeoutError("Connection time-out")

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("who", ["bridge", "tools"])
def test_the_bridge_and_tools_say_a_sasl_login_was_refused_during_start(
    monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    """As the connector does (below): not "cannot connect ... within" for a refused login."""
    from zkconsumer._errors import AdminError
    from zkconsumer.bridge import connecting as _bridge
    from zkconsumer.zk import session

    address = f"127.0.0.1:{free_port()}"
    refused = rf"SASL login as 'zkc' \(zookeeper.auth\) refused by ZooKeeper at {address}"
    if who == "bridge":
        monkeypatch.setattr(_bridge, "KazooClient", _RefusedDuringStart)
        bridge = Bridge(address, "127.0.0.1:1", connect_timeout_s=0.3, environ=_bridge_env())
        with pytest.raises(ZkConsumerError, match=f"^{refused}"):
            bridge.run()
    else:
        monkeypatch.setattr(session, "KazooClient", _RefusedDuringStart)
        # Something listens there: the tools' probe (a refused port is named at once) passes
        # and the refusal comes from the login, as from a real ZooKeeper.
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen()
            address = f"127.0.0.1:{listening.getsockname()[1]}"
            refused = rf"SASL login as 'zkc' \(zookeeper.auth\) refused by ZooKeeper at {address}"
            with pytest.raises(AdminError, match=f"^{AUTH_ENV}: {refused}"):
                session.connect(address, timeout_s=0.3, environ=_bridge_env())


def test_a_sasl_login_refused_before_the_connection_is_reported_says_so() -> None:
    """ZooKeeper may refuse the SASL exchange before kazoo reports the connection: start()
    then timed out and the error said "Connection time-out" (a flaky CI failure), where the
    same refusal a moment later says the login was refused."""
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.protocol.states import KazooState, KeeperState

    from zkconsumer.zk.session import start_and_check_login

    class Client:  # kazoo's KazooClient, refused during start()
        class handler:
            timeout_exception = KazooTimeoutError

        client_state = KeeperState.CONNECTING

        def add_listener(self, listener: Any) -> None:
            self.listener = listener

        def remove_listener(self, listener: Any) -> None:
            self.listener = None

        def start(self, timeout: float) -> None:
            self.client_state = KeeperState.AUTH_FAILED
            self.listener(KazooState.LOST)
            self.client_state = KeeperState.CLOSED  # start() stops the client on its way out
            raise KazooTimeoutError("Connection time-out")

    client = Client()
    with pytest.raises(ZkConsumerError, match=r"^SASL login as 'zkc' \(zookeeper.auth\) "
                                              r"refused by ZooKeeper at 127.0.0.1:1"):
        start_and_check_login(client, _sasl_config("127.0.0.1:1", "g"))  # type: ignore[arg-type]
    assert client.listener is None
