"""The ``zkconsumer`` command line: argparse and rich over the library. Nothing imports it.

:mod:`~zkconsumer.cli.app` builds the parser and runs a subcommand; each of the other
modules registers a family of subcommands (``consume``: console-consumer; ``groups``; ``offsets``;
``verify``: verify-rebalance; ``kafka``: Kafka's own tool names; ``lag``: groups lag and the
exporter; ``migrate``: migrate and compare); ``common`` holds what they all share,
``plumbing`` what the ZooKeeper tools (the first four) share.
"""

from zkconsumer.cli.app import main

__all__ = ["main"]
