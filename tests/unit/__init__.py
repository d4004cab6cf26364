"""Tests that need no ZooKeeper, Kafka or JVM: fast, run first."""
