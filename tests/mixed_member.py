"""A zkconsumer group member in its own process that speaks as tools/jvm/src/Member.java
does, for the mixed-group tests (tests/jvm.py reads both alike):

    python -m tests.mixed_member ZK GROUP (topics=T1,T2 | whitelist=REGEX) streams=N \
        commit=auto|each|none [legacy.key=value ...]

Prints ``READY <consumer id>`` once its streams exist, one line
``MSG <topic> <partition> <offset> <stream index> <epoch millis>`` per message handed out,
and ``CLOSED <consumer id>`` after a clean shutdown on SIGTERM; warnings go to stderr.
``commit=each`` commits each message's partition after printing it, as Member.java does.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import Any

from zkconsumer import (
    ConsumerConfig,
    PartitionsNotOwnedError,
    Whitelist,
    ZkConnectionLostError,
    create_consumer_connector,
)

_OUT = threading.Lock()  # one whole line at a time from any stream thread


def emit(line: str) -> None:
    with _OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def drain(connector: Any, stream: Any, index: int, each: bool) -> None:
    try:
        for m in stream:
            emit(f"MSG {m.topic} {m.partition} {m.offset} {index} {int(time.time() * 1000)}")
            if each:
                try:
                    connector.commit_offsets({(m.topic, m.partition): m.offset + 1})
                except (PartitionsNotOwnedError, ZkConnectionLostError) as e:
                    # a rebalance gave the partition away meanwhile: its next owner hands
                    # this message out again
                    print(f"not committed: {e}", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - the stream ends with an error at shutdown
        pass


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    zk, group = sys.argv[1:3]
    opts = dict(arg.split("=", 1) for arg in sys.argv[3:])
    topics = opts.pop("topics", None)
    whitelist = opts.pop("whitelist", None)
    streams = int(opts.pop("streams", "1"))
    commit = opts.pop("commit", "auto")
    props: dict[str, object] = {"zookeeper.connect": zk, "group.id": group, **opts}
    if commit in ("each", "none"):
        props["auto.commit.enable"] = "false"
    connector = create_consumer_connector(ConsumerConfig(props))
    if whitelist is not None:
        all_streams = connector.create_message_streams_by_filter(Whitelist(whitelist), streams)
    else:
        assert topics is not None, "topics= or whitelist= is required"
        by_topic = connector.create_message_streams(dict.fromkeys(topics.split(","), streams))
        all_streams = [s for ss in by_topic.values() for s in ss]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    emit(f"READY {connector.consumer_id}")
    for i, s in enumerate(all_streams):
        threading.Thread(target=drain, args=(connector, s, i, commit == "each"),
                         daemon=True).start()
    stop.wait()
    connector.shutdown()
    emit(f"CLOSED {connector.consumer_id}")


if __name__ == "__main__":
    main()
