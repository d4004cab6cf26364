"""``zkconsumer groups list|describe|delete`` (ConsumerOffsetChecker, kafka-consumer-groups
``--zookeeper``); ``groups lag`` is :mod:`zkconsumer.cli.lag`'s."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kazoo.client import KazooClient

from zkconsumer import ops as _ops
from zkconsumer.broker.clients import parse_broker_list
from zkconsumer.cli.lag import add_groups_lag, age_cell
from zkconsumer.cli.plumbing import (
    _add_common,
    _cell,
    _count,
    _handler,
    _name,
    _print_json,
    _progress,
    _table,
)
from zkconsumer.zk.session import command_config

__all__ = ["register"]



@_handler
def _cmd_groups_list(args: argparse.Namespace, zk: KazooClient) -> int:
    groups = _ops.list_groups(zk)
    if args.json:
        _print_json([g.to_json() for g in groups])
        return 0
    if not groups:
        print("no consumer groups in ZooKeeper")
        return 0
    table = _table([("GROUP", "left"), ("MEMBERS", "right")])
    for g in groups:
        table.add_row(g.group, str(g.members))
    table.print()
    return 0


@_handler
def _cmd_groups_describe(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    desc = _ops.describe_group(zk, group, args.bootstrap_server,
                                 kafka=command_config(args.command_config))
    if desc.log_end_error is not None:
        print(f"zkconsumer groups describe: warning: {desc.log_end_error}", file=sys.stderr)
    if desc.kafka_offsets_error is not None and not args.members:
        print(f"zkconsumer groups describe: warning: {desc.kafka_offsets_error}",
              file=sys.stderr)
    for warning in desc.warnings:
        print(f"zkconsumer groups describe: warning: {warning}", file=sys.stderr)
    note = None if args.members else desc.offsets_note()
    if note is not None:
        print(f"zkconsumer groups describe: warning: {note}", file=sys.stderr)
    for warning in [] if args.members else desc.bad_offsets_warnings():
        print(f"zkconsumer groups describe: warning: {warning}", file=sys.stderr)
    if desc.unknown_lags and not args.members:
        # Said in both modes: a JSON reader summing the lags must not take null for 0.
        print(f"zkconsumer groups describe: warning: total lag {desc.total_lag_text()}: lag "
              f"unknown where a partition has no committed offset or no known log end",
              file=sys.stderr)
    if args.json:
        if args.members:
            _print_json([m.to_json() for m in desc.members])
        else:
            _print_json([r.to_json() for r in desc.rows()])
        return 0
    if not args.members:
        n = len(desc.members)
        print(f"Group {group}: {n} registered member{'s' if n != 1 else ''}, "
              f"total lag {desc.total_lag_text()}")
        # Where each offset came from, last (the columns before it stay where they were),
        # once Kafka holds any: without one, every offset is ZooKeeper's.
        sources = desc.offsets_in_kafka
        columns = [("TOPIC", "left"), ("PARTITION", "right"), ("OFFSET", "right"),
                   ("LOG-END-OFFSET", "right"), ("LAG", "right"), ("OWNER", "left")]
        table = _table([*columns, *([("OFFSET-SOURCE", "left")] if sources else []),
                        ("TIME-LAG", "right")])
        for r in desc.partitions:
            cells = [_cell(r.topic), _cell(r.partition), _cell(r.offset),
                     _cell(r.log_end_offset), _cell(r.lag), _cell(r.owner)]
            table.add_row(*cells, *([_cell(r.offset_source)] if sources else []),
                          _cell(age_cell(r.time_lag, r.offset is None)))
        if desc.partitions:
            table.print()
        else:
            print("no partitions: nothing subscribed, committed or owned")
        if desc.idle_threads:
            print("Threads owning no partition: " + ", ".join(desc.idle_threads))
    if desc.members or args.members:
        if not args.members:
            print()
        # The subscription without spaces: one cell of a space-separated line.
        mt = _table([("CONSUMER-ID", "left"), ("PATTERN", "left"), ("SUBSCRIPTION", "left"),
                     ("THREADS", "right"), ("PARTITIONS", "right")])
        for m in desc.members:
            sub = ",".join(f"{k}:{v}" for k, v in m.subscription.items())
            mt.add_row(m.consumer_id, m.pattern, sub, str(len(m.threads)),
                       str(m.owned_partitions))
        if desc.members:
            mt.print()
        else:
            print(f"group {group} has no registered members")
    return 0


@_handler
def _cmd_groups_delete(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    topic = _name(args.topic, "topic") if args.topic is not None else None
    kafka = command_config(args.command_config)  # a bad file: nothing deleted
    if args.bootstrap_server is not None:
        parse_broker_list(args.bootstrap_server)  # nor a typo in it
    with _progress(f"deleting group {group}") as bar:
        result = _ops.delete_group(zk, group, topic, progress=bar)
    if result.group_deleted:
        extra = f" (topic {topic} was its only topic)" if topic is not None else ""
        print(f"deleted group {group}{extra}: {_count(result.deleted_znodes, 'znode')}")
    else:
        print(f"deleted topic {topic} of group {group}: "
              f"{_count(result.deleted_znodes, 'znode')}")
    # Kafka's offsets are not deleted (after a migration the modern group lives there under
    # the same id), but a member committing there resumes from them: say so.
    left = _ops.kafka_offsets_left(zk, group, topic, args.bootstrap_server, kafka)
    warning = left.warning(args.command_config)
    if warning is not None:
        print(f"zkconsumer groups delete: warning: {warning}", file=sys.stderr)
    return 0

def register(sub: Any) -> None:
    """Add ``groups`` (list, describe, delete, lag) to the CLI."""
    # Each action sets ``command`` to "groups list" etc., the prefix cli.main gives an
    # error ("zkconsumer groups delete: ..."), as the warnings have it.
    g = sub.add_parser("groups", help="list, describe or delete consumer groups",
                       description="Consumer groups in ZooKeeper (/consumers).")
    gsub = g.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = gsub.add_parser("list", help="every group with its number of registered members",
                        description="List the groups under /consumers.")
    _add_common(p)
    p.set_defaults(func=_cmd_groups_list, command="groups list")
    p = gsub.add_parser(
        "describe", help="offsets, log end offsets, lag and owners of a group",
        description="Per partition: committed offset, log end offset, lag and owning "
        "thread; the total lag; threads owning nothing; the members and their "
        "subscriptions (--members for the member list alone). The committed offset is the "
        "one a member resumes from: the larger of ZooKeeper's and the group's offset in "
        "Kafka (offsets.storage=kafka, dual commit), with an OFFSET-SOURCE column once Kafka "
        "holds any; a warning says when Kafka could not be asked. TIME-LAG, last: the age "
        "of the message at the committed offset (its timestamp, read from the brokers), "
        "0.0s caught up, ? when it cannot be told. Warnings also name "
        "offsets no member can resume from: past the log end, or of topics or partitions "
        "not in /brokers/topics.")
    _add_common(p, bootstrap=True)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.add_argument("--members", action="store_true",
                   help="list the members (consumer id, subscription, threads) only")
    p.set_defaults(func=_cmd_groups_describe, command="groups describe")
    p = gsub.add_parser(
        "delete", help="delete a group (or one topic of it) with no registered member",
        description="Delete /consumers/G, or only topic T's offsets and owners (the whole "
        "group when T is its only topic). Refused while members are registered. The group's "
        "committed offsets in Kafka (offsets.storage=kafka, dual commit) are not deleted: a "
        "warning says when it has any (a member committing there resumes from them), or "
        "when Kafka could not be asked.")
    _add_common(p, bootstrap=True, json_flag=False)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to delete")
    p.add_argument("--topic", metavar="T", help="delete only this topic's offsets and owners")
    p.set_defaults(func=_cmd_groups_delete, command="groups delete")
    add_groups_lag(gsub)
