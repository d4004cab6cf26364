"""One or two examples for the end of each subcommand's ``-h``, and the help formatter
that prints them as written (argparse would run their lines together)."""

from __future__ import annotations

import argparse

__all__ = ["EXAMPLES", "HelpFormatter", "examples_text"]

_ZK = "localhost:2181"

#: Each subcommand's examples, by its name after ``zkconsumer``.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "stack": ("zkconsumer stack up --dir .stack/local",
              "zkconsumer stack status --dir .stack/local"),
    "bridge": (f"zkconsumer bridge --zookeeper {_ZK} --bootstrap-server localhost:9092",),
    "console-consumer": (f"zkconsumer console-consumer --zookeeper {_ZK} --topic orders "
                         "--from-beginning --max-messages 10",),
    "groups list": (f"zkconsumer groups list --zookeeper {_ZK}",),
    "groups describe": (f"zkconsumer groups describe --zookeeper {_ZK} --group orders-app",),
    "groups delete": (f"zkconsumer groups delete --zookeeper {_ZK} --group old-app",
                      f"zkconsumer groups delete --zookeeper {_ZK} --group orders-app "
                      "--topic retired-topic"),
    "groups lag": (f"zkconsumer groups lag --zookeeper {_ZK}",
                   f"zkconsumer groups lag --zookeeper {_ZK} --group orders-app --watch"),
    "offsets export": (f"zkconsumer offsets export --zookeeper {_ZK} --group orders-app "
                       "--output offsets.txt",),
    "offsets import": (f"zkconsumer offsets import --zookeeper {_ZK} --input offsets.txt "
                       "--dry-run",
                       f"zkconsumer offsets import --zookeeper {_ZK} --input offsets.txt"),
    "offsets reset": (f"zkconsumer offsets reset --zookeeper {_ZK} --group orders-app "
                      "--topic orders --to-earliest",
                      f"zkconsumer offsets reset --zookeeper {_ZK} --group orders-app "
                      "--topic orders --to 2024-05-01T12:00:00Z --execute"),
    "verify-rebalance": (f"zkconsumer verify-rebalance --zookeeper {_ZK} --group orders-app",),
    "migrate status": (f"zkconsumer migrate status --zookeeper {_ZK} --bootstrap-server "
                       "localhost:9092 --group orders-app",),
    "migrate copy": (f"zkconsumer migrate copy --zookeeper {_ZK} --bootstrap-server "
                     "localhost:9092 --group orders-app --from zookeeper --to kafka --dry-run",),
    "compare": (f"zkconsumer compare --zookeeper {_ZK} --bootstrap-server localhost:9092 "
                "--topic bench --members 3 --short",),
    "consumer-groups": (f"zkconsumer consumer-groups --zookeeper {_ZK} --list",
                        f"zkconsumer consumer-groups --zookeeper {_ZK} --describe --group "
                        "orders-app"),
    "consumer-offset-checker": (f"zkconsumer consumer-offset-checker --zookeeper {_ZK} "
                                "--group orders-app --broker-info",),
    "export-zk-offsets": (f"zkconsumer export-zk-offsets --zkconnect {_ZK} --group orders-app "
                          "--output-file offsets.txt",),
    "import-zk-offsets": (f"zkconsumer import-zk-offsets --zkconnect {_ZK} --input-file "
                          "offsets.txt",),
    "update-offsets-in-zk": ("zkconsumer update-offsets-in-zk earliest consumer.properties "
                             "orders",),
    "verify-consumer-rebalance": (f"zkconsumer verify-consumer-rebalance --zookeeper.connect "
                                  f"{_ZK} --group orders-app",),
    "exporter": (f"zkconsumer exporter --zookeeper {_ZK} --port 9308",
                 f"zkconsumer exporter --zookeeper {_ZK} --once"),
}

_HEAD = "examples:"


def examples_text(command: str) -> str | None:
    """The ``examples:`` paragraph of ``command`` (None when it has none)."""
    lines = EXAMPLES.get(command)
    if not lines:
        return None
    return "\n".join([_HEAD, *(f"  {line}" for line in lines)])


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the ``examples:`` paragraph of an epilog keeps its lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for p in text.split("\n\n"):
            if p.startswith(_HEAD):
                out.append("\n".join(indent + line for line in p.splitlines()))
            else:
                out.append(super()._fill_text(p, width, indent))
        return "\n\n".join(out)
