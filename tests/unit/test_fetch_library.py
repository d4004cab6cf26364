"""Which client library fetches: confluent-kafka by default, kafka-python where it cannot be
imported (said once at INFO), never in place of an explicit ``fetch.backend=confluent``."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from zkconsumer import ConfigError, ConsumerConfig
from zkconsumer.broker import clients

MIN = {"zookeeper.connect": "zk:2181", "group.id": "g"}


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The import's outcome and the INFO line looked up anew by the test."""
    monkeypatch.setattr(clients, "_CONFLUENT_MISSING", [])
    monkeypatch.setattr(clients, "_FALLBACK_LOGGED", threading.Event())
    yield


@pytest.fixture
def without_confluent(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules: `import confluent_kafka` raises ImportError, as where it is missing.
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)


def test_the_default_backend_is_confluent(fresh: None) -> None:
    config = ConsumerConfig(MIN)
    assert config.fetch_backend == "confluent"
    assert clients.fetch_library(config) == "confluent"


def test_kafka_python_when_asked(without_confluent: None, caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    config = ConsumerConfig({**MIN, "fetch.backend": "kafka-python"})
    assert clients.fetch_library(config) == "kafka-python"
    assert caplog.records == []  # asked for: nothing to say


def test_the_default_falls_back_to_kafka_python_with_one_info_line(
        without_confluent: None, caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    config = ConsumerConfig(MIN)
    assert [clients.fetch_library(config) for _ in range(3)] == ["kafka-python"] * 3
    said = [r for r in caplog.records if r.name.startswith("zkconsumer")]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].levelno == logging.INFO
    assert "confluent-kafka cannot be imported" in said[0].getMessage()
    assert "fetching with kafka-python" in said[0].getMessage()


def test_an_explicit_confluent_is_not_replaced(without_confluent: None) -> None:
    config = ConsumerConfig({**MIN, "fetch.backend": "confluent"})
    with pytest.raises(ConfigError) as e:
        clients.fetch_library(config)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("fetch.backend=confluent needs confluent-kafka")
    assert "pip install confluent-kafka" in message and "fetch.backend=kafka-python" in message
