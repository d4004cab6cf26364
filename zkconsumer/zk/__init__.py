"""ZooKeeper: the one module of every path and payload, reads, sessions, transactions.

:mod:`~zkconsumer.zk.paths` owns every znode path and JSON payload the legacy consumer and
its brokers use (golden tests pin them byte for byte); :mod:`~zkconsumer.zk.read` reads them;
:mod:`~zkconsumer.zk.session` logs in and connects; :mod:`~zkconsumer.zk.transactions` writes
several znodes at once; :mod:`~zkconsumer.zk.handler` is the kazoo handler every client is
given. Nothing here starts a thread: kazoo's handler does.
"""
