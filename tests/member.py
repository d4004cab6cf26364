"""A group member in its own process, for tests that kill it (SIGKILL) or expire it.

    python -m tests.member ZK GROUP TOPIC STREAMS [key=value ...]

Prints ``READY <consumer id>`` once its first rebalance is done, then consumes (counting
messages, printing ``MSG topic partition offset`` per message when ``print=1``) until killed.
With ``out=PATH`` those lines are appended to PATH instead, one write each: a write to a
pipe blocks while its reader lags, and all the while the auto-commit can cover a message
whose line is not out yet, which a kill then makes look lost.
"""

from __future__ import annotations

import os
import sys
import threading

from zkconsumer import ConsumerConfig, create_consumer_connector


def main() -> None:
    zk, group, topic, streams = sys.argv[1:5]
    extra = dict(arg.split("=", 1) for arg in sys.argv[5:])
    show = extra.pop("print", "0") == "1"
    out_path = extra.pop("out", None)
    out_fd = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT) if out_path else None
    slow = float(extra.pop("slow", "0"))  # seconds per message: a slow application
    props: dict[str, object] = {"zookeeper.connect": zk, "group.id": group,
                                "zookeeper.session.timeout.ms": "2000"}
    props.update(extra)
    connector = create_consumer_connector(ConsumerConfig(props))
    result = connector.create_message_streams({topic: int(streams)})
    print(f"READY {connector.consumer_id}", flush=True)
    lock = threading.Lock()

    def drain(stream: object) -> None:
        for m in stream:  # type: ignore[attr-defined]
            if out_fd is not None:
                os.write(out_fd, f"MSG {m.topic} {m.partition} {m.offset}\n".encode())
            elif show:
                with lock:
                    print(f"MSG {m.topic} {m.partition} {m.offset}", flush=True)
            if slow:
                threading.Event().wait(slow)

    threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in result[topic]]
    for t in threads:
        t.start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
