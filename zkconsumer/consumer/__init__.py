"""The consumer: ``ZookeeperConsumerConnector`` and what it is made of.

The connector registers the member, rebalances (the assignors of
:mod:`~zkconsumer.consumer.assignors`, ownership claimed in ZooKeeper), fetches through the
fetcher threads into the streams' queues, commits offsets (ZooKeeper or Kafka, fenced), and
measures itself. Its public names are re-exported by :mod:`zkconsumer`.
"""
