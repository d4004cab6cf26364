"""Tests against the real stack (ZooKeeper 3.8, Kafka 3.9 or Kafka 4 KRaft) and JVM members."""
