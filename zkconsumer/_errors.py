"""Every exception zkconsumer raises derives from :class:`ZkConsumerError`.

The hierarchy::

    ZkConsumerError
    ├── ConfigError (also ValueError)            bad or unknown configuration
    ├── ZkDataError (also ValueError)            a znode holds something we cannot decode
    ├── StackError                               the local stack could not start or stop
    ├── ConsumerRebalanceFailedException         "<id> can't rebalance after N retries"
    ├── MessageStreamsExistException             streams created twice on one connector
    ├── ConsumerTimeoutException                 consumer.timeout.ms passed with no message
    ├── ConsumerShutdownError                    the connector is shut down
    └── BackgroundThreadError                    a background thread died; carries its cause

Names ending in ``Exception`` keep the legacy (Scala) names so that ported code reads the
same; the rest follow Python conventions.
"""

from __future__ import annotations


class ZkConsumerError(Exception):
    """Root of every zkconsumer error."""


class ConfigError(ZkConsumerError, ValueError):
    """A configuration key or value is wrong; the message names the key and the value."""


class ZkDataError(ZkConsumerError, ValueError):
    """A znode's payload cannot be decoded; the message names the path when known."""


class StackError(ZkConsumerError):
    """The local stack (ZooKeeper, broker, bridge) failed to start, stop or answer."""


class ConsumerRebalanceFailedException(ZkConsumerError):
    """The rebalance did not succeed within ``rebalance.max.retries`` attempts."""


class MessageStreamsExistException(ZkConsumerError):
    """``create_message_streams*`` may be called once per connector."""


class ConsumerTimeoutException(ZkConsumerError):
    """No message arrived within ``consumer.timeout.ms``; the stream stays usable."""


class ConsumerShutdownError(ZkConsumerError):
    """The operation needs a running connector, and it is shut down."""


class BackgroundThreadError(ZkConsumerError):
    """A background thread of the connector failed; ``__cause__`` is its exception."""
