"""zkconsumer: Kafka's legacy ZooKeeper-based high-level consumer, in Python.

    import zkconsumer
    config = zkconsumer.ConsumerConfig({"zookeeper.connect": "zk:2181", "group.id": "g"})
    with zkconsumer.create_consumer_connector(config) as connector:
        streams = connector.create_message_streams({"orders": 2})
        for m in streams["orders"][0]:
            print(m.topic, m.partition, m.offset, m.key, m.message)

The public names are re-exported here from small private modules.
"""

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    AclRefusedError,
    AdminError,
    AssignmentStrategyMismatchError,
    BackgroundThreadError,
    CommandError,
    CommitFencedError,
    CompareError,
    ConfigError,
    ConsumerRebalanceFailedException,
    ConsumerShutdownError,
    ConsumerTimeoutException,
    GroupActiveError,
    KafkaGroupActiveError,
    KafkaToolError,
    KafkaUnknownError,
    MessageDecodeError,
    MessageStreamsExistException,
    MetricsPortError,
    MigrationError,
    MigrationGroupActiveError,
    MigrationUnknownGroupError,
    MigrationUnknownTopicError,
    OffsetCommitError,
    OffsetFileError,
    OutOfRangeError,
    PartitionsNotOwnedError,
    SessionUnprovenError,
    StackError,
    UnknownGroupError,
    UnknownTopicError,
    ZkConnectionLostError,
    ZkConsumerError,
    ZkConsumerSourceError,
    ZkDataError,
    ZooKeeperChangedError,
    ZooKeeperRefusedError,
    ZooKeeperUnreachableError,
)
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer._message import MessageAndMetadata
from zkconsumer._types import TopicPartition
from zkconsumer._version import __version__
from zkconsumer.consumer.connector import (
    ConsumerRebalanceListener,
    ZookeeperConsumerConnector,
    create_consumer_connector,
)
from zkconsumer.consumer.stream import KafkaStream

__all__ = [
    "AclRefusedError",
    "AdminError",
    "AssignmentStrategyMismatchError",
    "BackgroundThreadError",
    "Blacklist",
    "CommandError",
    "CommitFencedError",
    "CompareError",
    "ConfigError",
    "ConsumerConfig",
    "ConsumerRebalanceFailedException",
    "ConsumerRebalanceListener",
    "ConsumerShutdownError",
    "ConsumerTimeoutException",
    "GroupActiveError",
    "KafkaGroupActiveError",
    "KafkaStream",
    "KafkaToolError",
    "KafkaUnknownError",
    "MessageAndMetadata",
    "MessageDecodeError",
    "MessageStreamsExistException",
    "MetricsPortError",
    "MigrationError",
    "MigrationGroupActiveError",
    "MigrationUnknownGroupError",
    "MigrationUnknownTopicError",
    "OffsetCommitError",
    "OffsetFileError",
    "OutOfRangeError",
    "PartitionsNotOwnedError",
    "SessionUnprovenError",
    "StackError",
    "TopicFilter",
    "TopicPartition",
    "UnknownGroupError",
    "UnknownTopicError",
    "Whitelist",
    "ZkConnectionLostError",
    "ZkConsumerError",
    "ZkConsumerSourceError",
    "ZkDataError",
    "ZooKeeperChangedError",
    "ZooKeeperRefusedError",
    "ZooKeeperUnreachableError",
    "ZookeeperConsumerConnector",
    "__version__",
    "create_consumer_connector",
]

#: The private module each re-exported class is defined in, for tools that need it (the test
#: suite's doctest collection): the classes' own ``__module__`` says ``zkconsumer``.
_DEFINED_IN: dict[str, str] = {}

# As httpx does: tracebacks and reprs name the public path (zkconsumer.ConfigError), not the
# private module a name is defined in, which may move between releases.
for _name in __all__:
    _public = globals()[_name]
    if isinstance(_public, type):
        _DEFINED_IN[_name] = _public.__module__
        _public.__module__ = __name__
del _name, _public
