"""ZooKeeper authentication and ACLs: what the connector creates, others cannot tamper with."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl_credential

from tests.support import NullFetcher, group_owners
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector
from zkconsumer import _zkpaths as zp


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
