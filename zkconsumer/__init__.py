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
    AssignmentStrategyMismatchError,
    BackgroundThreadError,
    CommitFencedError,
    ConfigError,
    ConsumerRebalanceFailedException,
    ConsumerShutdownError,
    ConsumerTimeoutException,
    MessageDecodeError,
    MessageStreamsExistException,
    OffsetCommitError,
    PartitionsNotOwnedError,
    StackError,
    ZkConnectionLostError,
    ZkConsumerError,
    ZkDataError,
)
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer._message import MessageAndMetadata
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.connector import (
    ConsumerRebalanceListener,
    ZookeeperConsumerConnector,
    create_consumer_connector,
)
from zkconsumer.consumer.stream import KafkaStream

__version__ = "0.1.0"

__all__ = [
    "AssignmentStrategyMismatchError",
    "BackgroundThreadError",
    "Blacklist",
    "CommitFencedError",
    "ConfigError",
    "ConsumerConfig",
    "ConsumerRebalanceFailedException",
    "ConsumerRebalanceListener",
    "ConsumerShutdownError",
    "ConsumerTimeoutException",
    "KafkaStream",
    "MessageAndMetadata",
    "MessageDecodeError",
    "MessageStreamsExistException",
    "OffsetCommitError",
    "PartitionsNotOwnedError",
    "ZkConnectionLostError",
    "StackError",
    "TopicFilter",
    "TopicPartition",
    "Whitelist",
    "ZkConsumerError",
    "ZkDataError",
    "ZookeeperConsumerConnector",
    "create_consumer_connector",
]
