"""The broker side: the one place Kafka clients are built, and the fetch backends.

Nothing here knows of ZooKeeper or of the consumer's groups."""
