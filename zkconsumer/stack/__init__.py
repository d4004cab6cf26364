"""The local stack (ZooKeeper and Kafka as background processes) and the bridge.

:mod:`~zkconsumer.stack.local` starts real ZooKeeper 3.8 and Kafka (3.9 in ZooKeeper mode, or
4 in KRaft mode) for development and the tests, their jars copied from Maven Central by
:mod:`~zkconsumer.stack.classpaths`; :mod:`~zkconsumer.stack.bridge` registers a
cluster without ZooKeeper in ZooKeeper, as ZooKeeper-mode brokers do themselves.
"""
