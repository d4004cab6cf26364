"""Moving a group from the legacy ZooKeeper consumer to the broker-coordinated protocol, and
back, and the two protocols compared side by side.

:mod:`~zkconsumer.migration.status` (``migrate status``: whether a group may move now, and
why), :mod:`~zkconsumer.migration.copy` (``migrate copy``: one offset store seeded from the
other), both over :mod:`~zkconsumer.migration.stores` (what they read of both stores and the
brokers); :mod:`~zkconsumer.migration.compare` (``zkconsumer compare``: one workload run with
each protocol, its members in :mod:`~zkconsumer.migration.compare_member` processes, its
settings and results in :mod:`~zkconsumer.migration.compare_settings`, its report in
:mod:`~zkconsumer.migration.compare_report`). Nothing here prints; ``zkconsumer.cli.migrate``
does. What the operator commands share with the migration (Kafka's store of a group's
offsets, the class of a partition across both stores) is in
:mod:`zkconsumer.ops.kafka_store`: the migration builds on the operator functions, not the
reverse.
"""
