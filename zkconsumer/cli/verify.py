"""``zkconsumer verify-rebalance``: VerifyConsumerRebalance."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kazoo.client import KazooClient

from zkconsumer import ops as _ops
from zkconsumer.cli.plumbing import _add_common, _handler, _name, _print_json

__all__ = ["register"]



@_handler
def _cmd_verify(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    result = _ops.verify_rebalance(zk, group)
    if args.json:
        _print_json([c.to_json() for c in result.checks])
        if not result.ok:
            print(result.reason, file=sys.stderr)
    else:
        print(result.reason)
    return 0 if result.ok else 1


def register(sub: Any) -> None:
    """Add ``verify-rebalance`` to the CLI."""
    p = sub.add_parser(
        "verify-rebalance", help="check every partition has a live owner",
        description="VerifyConsumerRebalance: every partition of every subscribed topic has "
        "an owner, and every owner is a live thread of a registered member. Exit status 0 "
        "when so, 1 otherwise; the reason is printed.")
    _add_common(p)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to check")
    p.set_defaults(func=_cmd_verify)
