"""The assignors: pure functions of (members' threads, partitions) that every member computes
alike.

``range`` and ``roundrobin`` are the legacy consumer's (:mod:`~zkconsumer.consumer.assignors.core`,
with the JVM's ``String.hashCode`` order and the release differences of
:mod:`~zkconsumer.consumer.assignors.jvmcompat`); ``sticky``
(:mod:`~zkconsumer.consumer.assignors.sticky`) is zkconsumer's own, for groups without JVM
members (:mod:`~zkconsumer.consumer.assignors.strategy` refuses a member whose strategy
differs from the group's).
"""

from zkconsumer.consumer.assignors.core import assign, range_assign, roundrobin_assign
from zkconsumer.consumer.assignors.sticky import sticky_assign

__all__ = ["assign", "range_assign", "roundrobin_assign", "sticky_assign"]
