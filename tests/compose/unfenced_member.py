"""A deliberately broken member for checking the compose fault tests: the harness's member
process (``python -m tools.fault_harness member``) with zkconsumer's fencing turned off.

Its delivery gate never closes (no lease, no pause while ZooKeeper is unreachable or the
session is lost) and its commit fence admits every offset: what the legacy consumer did.
tools/compose-check runs the fault tests against it with ``--unfenced`` to see them fail.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping

from tools.fault_harness import member_main
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.fence import CommitFence
from zkconsumer.consumer.gate import DeliveryGate


def _never_close(self: DeliveryGate, reason: str) -> None:
    return None


def _never_lapsed(self: DeliveryGate) -> bool:
    return False


def _admit_all(self: CommitFence, offsets: Mapping[TopicPartition, int], made_in: int,
               now_in: int, owned: Collection[TopicPartition]
               ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    return dict(offsets), {}


def unfence() -> None:
    DeliveryGate.close = _never_close  # type: ignore[method-assign]
    DeliveryGate.lapsed = _never_lapsed  # type: ignore[method-assign]
    CommitFence.admit = _admit_all  # type: ignore[method-assign]


if __name__ == "__main__":
    unfence()
    sys.exit(member_main(sys.argv[2:]))
