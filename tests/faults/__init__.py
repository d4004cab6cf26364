"""Fault-injection suite: the group under crashes, ZooKeeper/broker/bridge faults, bad input."""
