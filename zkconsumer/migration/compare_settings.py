"""``zkconsumer compare``'s settings and results: what defines one comparison
(:class:`CompareSettings`, both protocols get the same values) and what each protocol's run
measured (:class:`ProtocolResult`, :class:`ChangeResult`, :class:`CompareResult`). The
runner is :mod:`zkconsumer.migration.compare`.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from zkconsumer._errors import CompareError

PROTOCOLS = ("zookeeper", "kafka")
LABELS = {
    "zookeeper": "zkconsumer (ZooKeeper protocol)",
    "kafka": "kafka-python (group protocol)",
}
CHANGES = ("initial", "join", "leave", "kill")


@dataclass
class CompareSettings:
    """Everything that defines one comparison; both protocols get the same values."""

    bootstrap: str
    zookeeper: str
    topic: str
    members: int
    messages: int = 20_000
    partitions: int | None = None  # when the topic must be created; default 2 x (members+1)
    rate: float = 200.0  # messages per second during the membership changes
    session_timeout_ms: int = 6000
    commit_interval_ms: int = 1000
    dwell_s: float = 3.0  # steady traffic between two changes
    quiet_s: float = 2.0  # no assignment change for this long = settled
    settle_timeout_s: float = 90.0
    drain_timeout_s: float = 60.0
    protocols: tuple[str, ...] = PROTOCOLS
    # The brokers' security settings (``--command-config``): every client of the run uses
    # them, members included (they read the file themselves: no secret on a command line).
    command_config: str | None = None
    #: How long to wait for a ZooKeeper session (``--connect-timeout``), every harness client.
    connect_timeout_s: float = 10.0

    @classmethod
    def short(cls, bootstrap: str, zookeeper: str, topic: str, members: int,
              messages: int | None = None) -> CompareSettings:
        """The small fast mode (CI): a small backlog, short timeouts and pauses."""
        return cls(bootstrap, zookeeper, topic, members,
                   messages=2000 if messages is None else messages, rate=100.0,
                   session_timeout_ms=3000, commit_interval_ms=500, dwell_s=0.5,
                   quiet_s=1.0, settle_timeout_s=45.0, drain_timeout_s=30.0)

    def validate(self) -> None:
        if self.members < 2:
            raise CompareError("--members must be at least 2 (one leaves, one is killed)")
        if self.members > 50:
            raise CompareError("--members must be at most 50 (each member is a process)")
        if self.messages < 1:
            raise CompareError("--messages must be at least 1")
        # Written so that NaN fails too (every comparison with NaN is False).
        if not (isinstance(self.rate, (int, float)) and math.isfinite(self.rate)
                and self.rate > 0):
            raise CompareError(f"--rate must be a positive number, got {self.rate!r}")
        for flag, ms in (("--session-timeout-ms", self.session_timeout_ms),
                         ("commit_interval_ms", self.commit_interval_ms)):
            if not (isinstance(ms, int) and not isinstance(ms, bool) and ms > 0):
                raise CompareError(f"{flag} must be a positive integer, got {ms!r}")
        for flag, seconds, zero_ok in (
            ("--connect-timeout", self.connect_timeout_s, False),
            ("dwell_s", self.dwell_s, True),
            ("quiet_s", self.quiet_s, True),
            ("settle_timeout_s", self.settle_timeout_s, False),
            ("drain_timeout_s", self.drain_timeout_s, False),
        ):
            if not (isinstance(seconds, (int, float)) and math.isfinite(seconds)
                    and (seconds >= 0 if zero_ok else seconds > 0)):
                what = "a finite number >= 0" if zero_ok else "a positive finite number"
                raise CompareError(f"{flag} must be {what} of seconds, got {seconds!r}")
        if self.partitions is not None and self.partitions < self.members + 1:
            raise CompareError(
                f"--partitions must be at least --members + 1 = {self.members + 1}"
            )
        for p in self.protocols:
            if p not in PROTOCOLS:
                raise CompareError(f"unknown protocol {p!r} (expected one of {PROTOCOLS})")


@dataclass
class ChangeResult:
    """One membership change and how the group took it."""

    change: str
    member: str | None  # who joined, left or was killed
    at_s: float  # seconds since the run started
    reassignment_s: float | None  # None: not settled within the timeout
    assignment: dict[str, list[int]]  # member name -> partitions, once settled
    expected: dict[str, list[int]]  # what the range assignor gives for the live members

    @property
    def as_expected(self) -> bool:
        return self.assignment == self.expected


@dataclass
class ProtocolResult:
    """One protocol's run."""

    protocol: str
    group: str
    members: int
    partitions: int
    changes: list[ChangeResult]
    backlog: int
    backlog_produce_s: float
    backlog_drain_s: float | None
    produced: int
    delivered: int
    unique: int
    lost: int
    duplicated: int
    duration_s: float
    #: member name -> [(seconds since the run started, cumulative messages)], for the chart.
    timeline: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    #: Duplicate deliveries by the change whose window they fell in (change -> count).
    duplicated_by_change: dict[str, int] = field(default_factory=dict)
    #: member name -> [(seconds since the run started, partitions)], every report.
    history: dict[str, list[tuple[float, list[int]]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float | None:
        if not self.backlog_drain_s:
            return None
        return self.backlog / self.backlog_drain_s

    def change(self, name: str) -> ChangeResult | None:
        return next((c for c in self.changes if c.change == name), None)


@dataclass
class CompareResult:
    settings: CompareSettings
    results: list[ProtocolResult]
    when: str
    #: Why the comparison stopped early (the runs in ``results`` completed), or None.
    incomplete: str | None = None

    def by_protocol(self, protocol: str) -> ProtocolResult | None:
        return next((r for r in self.results if r.protocol == protocol), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"when": self.when, "settings": asdict(self.settings),
                               "machine": {"cpus": os.cpu_count()},
                               "incomplete": self.incomplete, "results": []}
        for r in self.results:
            d = asdict(r)
            d.pop("timeline")
            d["throughput"] = r.throughput
            for c, cd in zip(r.changes, d["changes"], strict=True):
                cd["as_expected"] = c.as_expected
            out["results"].append(d)
        return out
