"""zkconsumer builds Kafka clients in one place, zkconsumer/broker/clients.py: a setting
(security, timeouts, topic auto-creation) is then honoured by every client alike."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "zkconsumer"
#: The client classes of kafka-python and confluent-kafka.
CLIENTS = frozenset({"KafkaConsumer", "KafkaAdminClient", "KafkaProducer", "KafkaClient",
                     "Consumer", "Producer", "AdminClient"})


def constructions(path: Path, root: Path = PACKAGE) -> list[str]:
    """The client classes ``path`` calls (by name or as an attribute: kafka.KafkaConsumer)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else None
            if name in CLIENTS:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return found


def test_only_broker_clients_builds_kafka_clients() -> None:
    elsewhere = [c for p in sorted(PACKAGE.rglob("*.py"))
                 if p != PACKAGE / "broker" / "clients.py" for c in constructions(p)]
    assert elsewhere == []


def test_the_check_sees_a_client_built_elsewhere(tmp_path: Path) -> None:
    planted = tmp_path / "common.py"
    source = (PACKAGE / "ops" / "common.py").read_text(encoding="utf-8")
    planted.write_text(source + "\n\ndef _admin():\n    import kafka\n"
                       "    return kafka.KafkaAdminClient()\n")
    assert [c.split(": ")[1] for c in constructions(planted, tmp_path)] == ["KafkaAdminClient"]
    assert constructions(PACKAGE / "broker" / "clients.py")  # where they are built
