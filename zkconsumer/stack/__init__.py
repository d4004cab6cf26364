"""The development stack: ZooKeeper and Kafka run locally, for development, the tests and
the tools (as ``kazoo.testing`` is kazoo's).

:mod:`~zkconsumer.stack.local` starts real ZooKeeper 3.8 and Kafka (3.9 in ZooKeeper mode, or
4 in KRaft mode, registered in ZooKeeper by :mod:`zkconsumer.bridge`) as background processes,
their jars copied from Maven Central by :mod:`~zkconsumer.stack.classpaths`. No production
code imports this package (``tools/check_layers.py`` refuses it); the ``zkconsumer stack``
command does.
"""
