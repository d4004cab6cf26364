"""``migrate copy``: seed one offset store of a group from the other.

:func:`copy_offsets` copies ZooKeeper -> Kafka to migrate, Kafka -> ZooKeeper to roll back.
It first waits until the group has no live consumer of either protocol, seen on several
checks in a row (:func:`wait_until_idle`); it never replaces a newer offset unless forced; it
copies the value as is, because both stores hold the *next* offset to consume (docs/znodes.md,
"Migration": tools that add or subtract one are wrong); it refuses, unless forced, offsets
outside their partition's log (what ``migrate status`` calls ``below_log_start`` and
``above_log_end``: blockers), so that the two agree. ZooKeeper is written in transactions
guarded against a consumer registering meanwhile (:func:`_write_zookeeper`), Kafka with an
OffsetCommit outside any generation (:func:`write_kafka_offsets`, which the tools' offset
writes use too). Nothing here prints; ``zkconsumer.cli.migrate`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from zkconsumer._errors import (
    MigrationError,
    MigrationGroupActiveError,
    OutOfRangeError,
    ZkDataError,
)
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import modern_admin
from zkconsumer.migration.stores import (
    STORES,
    LogRange,
    Store,
    _check_group,
    _check_topics,
    _described_log_range,
    _fmt_live,
    _live_consumers,
    _require_group,
    _require_topics,
    _topic_partitions,
    read_zk_offsets,
)
from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted
from zkconsumer.ops.kafka_store import (
    fmt_tps,
    modern_group,
    read_kafka_offsets,
    write_kafka_offsets,
)
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import transaction_cause
from zkconsumer.zk.session import acl_refused
from zkconsumer.zk.transactions import MAX_TRANSACTION_OPS, acl_unreadable, full_acl


@dataclass
class CopyAction:
    """What the copy does (or did) with one partition."""

    topic: str
    partition: int
    source_offset: int | None
    dest_offset: int | None
    # copy: destination missing or older; overwrite: destination newer, --force;
    # skip_newer: destination newer; skip_equal; skip_missing: nothing in the source;
    # skip_topic_missing: the brokers do not have the topic any more (deleted; even if
    # /brokers/topics still lists it), nothing to resume; skip_partition_missing: the
    # brokers' topic has no such partition any more (recreated smaller);
    # out_of_range: it would be copied, but the source offset is outside the partition's
    # log (``out_of_range`` says where): a real copy refuses the whole copy unless --force.
    action: str
    #: The partition's log range, read for the partitions the copy would write (None for
    #: the others, and where the brokers could not tell).
    log_start: int | None = None
    log_end: int | None = None
    #: ``below_log_start`` or ``above_log_end`` (the classes of ``migrate status``) when the
    #: source offset is outside [log_start, log_end]: a member fetching there resets the
    #: offset by auto.offset.reset. Set with --force too, where such an offset is copied.
    out_of_range: str | None = None

    @property
    def writes(self) -> bool:
        return self.action in ("copy", "overwrite")

    def range_note(self) -> str:
        """``t:3 12 > log end 10`` (or ``< log start``), for an out-of-range offset."""
        where = (f"< log start {self.log_start}" if self.out_of_range == "below_log_start"
                 else f"> log end {self.log_end}")
        return f"{self.topic}:{self.partition} {self.source_offset} {where}"


def fmt_out_of_range(actions: Sequence[CopyAction], limit: int = 4) -> str:
    """The :meth:`CopyAction.range_note` of the first ``limit`` actions, and how many more."""
    shown = ", ".join(a.range_note() for a in actions[:limit])
    return shown + (f", +{len(actions) - limit} more" if len(actions) > limit else "")


@dataclass
class CopyResult:
    """The plan, and what was written (nothing on a dry run)."""

    group: str
    source: Store
    dest: Store
    dry_run: bool
    force: bool
    actions: list[CopyAction]
    written: int
    #: Live consumers seen by the last check (dry run: reported, not waited for).
    live_consumers: list[str] = field(default_factory=list)
    idle_checks: int = 0
    #: Why the log range of the partitions to write could not be checked (a dry run, or
    #: --force, goes on without it; a real copy refuses); None when it was checked.
    log_range_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "from": self.source,
            "to": self.dest,
            "dry_run": self.dry_run,
            "force": self.force,
            "written": self.written,
            "live_consumers": list(self.live_consumers),
            "idle_checks": self.idle_checks,
            "log_range_error": self.log_range_error,
            "partitions": [asdict(a) for a in self.actions],
        }


def wait_until_idle(
    probe: Callable[[], list[str]],
    *,
    checks: int = 3,
    interval_s: float = 1.0,
    timeout_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[list[str], float], None] | None = None,
) -> int:
    """Wait until ``probe()`` finds nothing live on ``checks`` probes in a row, ``interval_s``
    apart; return the number of probes made.

    Several checks, because an owner znode can vanish for an instant during a rebalance
    (released by one member, not yet claimed by the next) and one empty look proves nothing.
    Raises :class:`MigrationGroupActiveError` listing what is still live after ``timeout_s``; stale
    ephemerals of a killed consumer go away when its ZooKeeper session expires, so a
    timeout longer than ``zookeeper.session.timeout.ms`` rides those out. ``on_wait(live,
    seconds_left)`` is told what a probe found live, the first time and whenever that
    changes (not on every probe), so a caller can say what it waits for.
    """
    if checks < 1:
        raise MigrationError(f"checks must be >= 1, got {checks}")
    deadline = time.monotonic() + timeout_s
    idle = probes = 0
    told: list[str] = []
    while True:
        live = probe()
        probes += 1
        idle = 0 if live else idle + 1
        if idle >= checks:
            return probes
        if live and on_wait is not None and sorted(live) != told:
            told = sorted(live)
            on_wait(live, max(0.0, deadline - time.monotonic()))
        if time.monotonic() + interval_s > deadline and live:
            shown = "; ".join(live[:5]) + (f"; +{len(live) - 5} more" if len(live) > 5 else "")
            raise MigrationGroupActiveError(
                f"the group still has live consumers after {timeout_s:g} s ({shown}): stop "
                "them (a killed consumer's znodes go when its session expires) and retry"
            )
        sleep(interval_s)


def plan_copy(
    source: Mapping[TopicPartition, int],
    dest: Mapping[TopicPartition, int],
    tps: Iterable[TopicPartition],
    force: bool,
    missing_topics: Collection[str] = (),
    missing_partitions: Collection[TopicPartition] = (),
    *,
    log_starts: Mapping[TopicPartition, int] | None = None,
    log_ends: Mapping[TopicPartition, int] | None = None,
) -> list[CopyAction]:
    """One action per partition; see :class:`CopyAction`. Values are copied unchanged;
    partitions of ``missing_topics`` (deleted topics) and ``missing_partitions`` (no longer
    in their topics) are never written.

    With ``log_starts`` and ``log_ends``, a partition to write whose source offset is
    outside its log (``migrate status``'s ``below_log_start`` and ``above_log_end``, judged
    on the offset the copy would leave in the destination) becomes ``out_of_range``, or is
    written all the same with ``force``; either way ``out_of_range`` names its class.

    >>> t = TopicPartition("t", 0)
    >>> [a.action for a in plan_copy({t: 12}, {}, [t], False, log_starts={t: 0},
    ...                              log_ends={t: 10})]
    ['out_of_range']
    >>> a, = plan_copy({t: 12}, {}, [t], True, log_starts={t: 0}, log_ends={t: 10})
    >>> a.action, a.out_of_range
    ('copy', 'above_log_end')
    """
    actions = []
    for tp in sorted(set(tps)):
        s, d = source.get(tp), dest.get(tp)
        if tp.topic in missing_topics:
            action = "skip_topic_missing"
        elif tp in missing_partitions:
            action = "skip_partition_missing"
        elif s is None:
            action = "skip_missing"
        elif d is None or d < s:
            action = "copy"
        elif d == s:
            action = "skip_equal"
        else:
            action = "overwrite" if force else "skip_newer"
        a = CopyAction(tp.topic, tp.partition, s, d, action)
        if a.writes and s is not None:
            a.log_start = (log_starts or {}).get(tp)
            a.log_end = (log_ends or {}).get(tp)
            if a.log_start is not None and a.log_start >= 0 and s < a.log_start:
                a.out_of_range = "below_log_start"
            elif a.log_end is not None and a.log_end >= 0 and s > a.log_end:
                a.out_of_range = "above_log_end"
            if a.out_of_range is not None and not force:
                a.action = "out_of_range"
        actions.append(a)
    return actions


class _TxFailed(MigrationError):
    """A ZooKeeper transaction of the copy failed; nothing of it was applied."""


class _AclUnknown(MigrationError):
    """A znode's ACL, needed for one the copy creates, cannot be read in full."""


def _acl_unknown(judge: str, why: str) -> _AclUnknown:
    return _AclUnknown(acl_unreadable(judge, why))


def _new_znode_acl(zk: KazooClient, path: str) -> list[Any] | None:
    """The ACL to create ``path`` with: None (the client's) when the tools' ACL is configured
    (``ZKCONSUMER_ZOOKEEPER_ACL`` becomes kazoo's default_acl, the ACL of every znode a tool
    creates); otherwise the nearest existing ancestor's, because kazoo's fallback is
    world-open and would strip a protected group's offsets of their protection."""
    if zk.default_acl:
        return None
    parent = path.rsplit("/", 1)[0]
    while parent and zk.exists(parent) is None:
        parent = parent.rsplit("/", 1)[0]
    if not parent:
        return None  # a new /consumers tree: nothing to inherit
    acl = full_acl(zk, parent)
    if acl is None:
        raise _acl_unknown(parent, f"create {path}")
    return acl


def _ids_guard(tx: Any, zk: KazooClient, group: str) -> None:
    """Make ``tx`` fail if a consumer registers in ``group`` before it commits: delete and
    re-create ``/consumers/G/ids`` (NotEmpty once a member is in it), or create and delete
    it (NodeExists once it appeared). The re-created znode keeps the ACL it had (or gets
    the tools' ACL when that cannot be read)."""
    ids = zp.ids_dir(group)
    if zk.exists(ids) is not None:
        acl = full_acl(zk, ids)
        if acl is None and not zk.default_acl:
            raise _acl_unknown(ids, f"re-create {ids} (the guard against consumers "
                               "registering during the copy)")
        tx.delete(ids)
        tx.create(ids, b"", acl=acl)
    else:
        group_dir = zp.group_dir(group)
        if zk.exists(group_dir) is None:
            zk.ensure_path(group_dir, acl=_new_znode_acl(zk, group_dir))
        tx.create(ids, b"")
        tx.delete(ids)


def _commit_chunk(
    zk: KazooClient, group: str, chunk: Sequence[tuple[TopicPartition, int]],
    expected: Mapping[TopicPartition, int], acls: dict[str, list[Any] | None],
    what: str = "migrate copy",
) -> None:
    """One transaction: the ids guard, then ``chunk``'s offsets, each conditional on the
    value the plan read (the znode's version now, or its absence)."""
    tx = zk.transaction()
    _ids_guard(tx, zk, group)
    ids = zp.ids_dir(group)
    for tp, off in chunk:
        path = zp.offset_path(group, tp.topic, tp.partition)
        try:
            data, stat = zk.get(path)
        except NoNodeError:
            if tp in expected:
                raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} disappeared since "
                                "the plan") from None
            if tp.topic not in acls:  # read once per topic, and only when creating
                acls[tp.topic] = _new_znode_acl(zk, path)
            tx.create(path, zp.encode_offset(off), acl=acls[tp.topic])
            continue
        current: int | None
        try:
            current = zp.decode_offset(data, path)
        except ZkDataError:
            current = None
        if current is not None and current < 0:
            current = None  # "no offset", as the plan read it (read_zk_offsets skips it)
        if current != expected.get(tp):
            raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} changed since the plan "
                            f"({expected.get(tp)} -> {current})")
        tx.set_data(path, zp.encode_offset(off), version=stat.version)
    results = tx.commit()
    for op, r in zip(tx.operations, results, strict=False):
        if isinstance(r, NoAuthError):

            verb = {"Create": "create", "Create2": "create", "Delete": "delete"}.get(
                type(op).__name__, "write")
            raise acl_refused(zk, verb, op.path, what)
    cause = transaction_cause(tx.operations, results)
    if cause is None:
        if any(isinstance(r, Exception) for r in results):
            raise _TxFailed("the ZooKeeper transaction failed without a cause")
        return
    op, error = cause
    path = zk.unchroot(op.path)  # the ops carry the chroot prefix
    if path == ids and isinstance(error, (NotEmptyError, NodeExistsError)):
        raise MigrationGroupActiveError(f"a consumer registered in group {group!r} during the copy")
    tp_of = {zp.offset_path(group, tp.topic, tp.partition): tp for tp, _ in chunk}
    if path in tp_of and isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
        tp = tp_of[path]
        raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} changed since the plan "
                        f"({type(error).__name__})")
    raise _TxFailed(f"the ZooKeeper transaction failed on {path} ({type(error).__name__})")


def _write_zookeeper(
    zk: KazooClient, group: str, offsets: Mapping[TopicPartition, int],
    expected: Mapping[TopicPartition, int],
) -> None:
    """Write ``offsets`` in transactions that fail if anything changed since the plan.

    Existing znodes are set with the version read now and checked against the planned value;
    each transaction also deletes and re-creates ``/consumers/G/ids`` (or creates and
    deletes it), which ZooKeeper refuses when a consumer registered since the idle checks.
    A transaction holds at most :data:`MAX_TRANSACTION_OPS` operations (ZooKeeper refuses
    requests over ~1 MB): a bigger group is written in several, and a failure names how
    many offsets the earlier ones wrote. New znodes get the ACL of the group's (see
    :func:`_new_znode_acl`).
    """
    items = sorted(offsets.items())
    per_tx = max(1, MAX_TRANSACTION_OPS - 2)  # two ops of each go to the ids guard
    acls: dict[str, list[Any] | None] = {}
    done = 0
    try:
        for topic in sorted({tp.topic for tp in offsets}):
            topic_dir = zp.offsets_topic_dir(group, topic)
            if zk.exists(topic_dir) is None:
                zk.ensure_path(topic_dir, acl=_new_znode_acl(zk, topic_dir))
        for i in range(0, len(items), per_tx):
            chunk = items[i:i + per_tx]
            what = "migrate copy" + (f" ({done} of {len(items)} offsets written before)"
                                     if done else "")
            _commit_chunk(zk, group, chunk, expected, acls, what)
            done += len(chunk)
    except MigrationError as e:
        if not done:
            told = "nothing was written"
        else:
            told = (f"{done} of {counted(len(items), 'offset')} were written before (a copy "
                    f"this big is split into transactions of {per_tx} offsets); the rest were "
                    "not")
        hint = {MigrationGroupActiveError: "; stop it and run again", _AclUnknown: ""}.get(
            type(e), "; run again")
        raise type(e)(f"{e}; {told}{hint}") from None


def copy_offsets(
    zk: KazooClient,
    group: str,
    bootstrap: str,
    source: Store,
    dest: Store,
    *,
    topics: Sequence[str] | None = None,
    force: bool = False,
    dry_run: bool = False,
    checks: int = 3,
    check_interval_s: float = 1.0,
    wait_timeout_s: float = 30.0,
    admin: Any = None,
    kafka: Mapping[str, Any] | None = None,
    timeout_ms: int = 15_000,
    log_range: Callable[[Sequence[TopicPartition]], LogRange] | None = None,
    on_wait: Callable[[list[str], float], None] | None = None,
) -> CopyResult:
    """Copy ``group``'s offsets from ``source`` to ``dest`` once no consumer is alive.

    Refuses at once, as ``migrate status`` does, a group that exists in neither protocol
    (:class:`MigrationUnknownGroupError`) and a topic of ``topics`` the group has no offset for that
    exists nowhere (:class:`MigrationUnknownTopicError`). Then waits (see :func:`wait_until_idle`)
    until the group has no owner znode, no registered legacy consumer and no modern member;
    a dry run looks once and reports what it saw instead. A partition is written when the
    destination has no offset or an older one; a newer destination offset is kept unless
    ``force``. Partitions of topics the brokers do not have (deleted; also those
    ``/brokers/topics`` still lists, as ``migrate status``'s ``topic_missing``) are skipped
    (``skip_topic_missing``), and so are partitions the brokers' topics do not have
    (``skip_partition_missing``): their offsets are stale, and Kafka would refuse them. A
    topic the brokers do not answer for (not authorized to describe it, say) is not taken
    for missing: its offsets are to be written, their log range unknown (see below).

    The offsets to write are checked against their partitions' log range (read within
    ``timeout_ms``; ``log_range`` replaces :func:`broker_log_range`, as in
    :func:`migration_status`): an offset below the log start or past the log end, which
    ``migrate status`` calls a blocker, is refused with :class:`OutOfRangeError` and
    nothing is written, and so is a copy whose log range cannot be read; ``force`` copies
    them as they are. A dry run reports both instead (``out_of_range`` actions,
    ``log_range_error``). The written values are verified by reading them back.
    ``kafka``: the brokers' security settings (``zkconsumer.zk.session.command_config``).
    """
    if source not in STORES or dest not in STORES:
        raise MigrationError(f"stores are 'zookeeper' and 'kafka', got {source!r} -> {dest!r}")
    if source == dest:
        raise MigrationError(f"--from and --to are both {source!r}")
    _check_group(group)
    _check_topics(topics or ())
    own_admin = admin is None
    if admin is None:
        admin = modern_admin(bootstrap, kafka=kafka)
    try:
        wanted = set(topics) if topics else None
        # A typo is refused before waiting for anything, as `migrate status` refuses it.
        _refuse_unknown(zk, admin, group, wanted)

        def probe() -> list[str]:
            return _live_consumers(zk, admin, group)

        live: list[str] = []
        if dry_run:
            live = probe()
            probes = 1
        else:
            probes = wait_until_idle(probe, checks=checks, interval_s=check_interval_s,
                                     timeout_s=wait_timeout_s, on_wait=on_wait)
        zk_offsets = read_zk_offsets(zk, group, wanted)
        kafka_offsets = read_kafka_offsets(admin, group)
        if wanted is not None:
            kafka_offsets = {tp: o for tp, o in kafka_offsets.items() if tp.topic in wanted}
        src, dst = ((zk_offsets, kafka_offsets) if source == "zookeeper"
                    else (kafka_offsets, zk_offsets))
        if not src:
            where = "ZooKeeper" if source == "zookeeper" else "Kafka"
            raise MigrationError(f"group {group!r} has no committed offsets in {where}"
                                 + (f" for {', '.join(sorted(wanted))}" if wanted else ""))
        actions, range_error = _plan_with_log_range(zk, admin, bootstrap, src, dst, force,
                                                    timeout_ms, kafka, log_range)
        if not dry_run:
            _refuse_out_of_range(actions, source, range_error, force)
        to_write = {TopicPartition(a.topic, a.partition): a.source_offset
                    for a in actions if a.writes and a.source_offset is not None}
        written = 0
        if to_write and not dry_run:
            _write_and_verify(zk, admin, group, source, dest, to_write, dst, probe)
            written = len(to_write)
        return CopyResult(group, source, dest, dry_run, force, actions, written, live, probes,
                          range_error)
    finally:
        if own_admin:
            admin.close()


def _refuse_unknown(zk: KazooClient, admin: Any, group: str, wanted: set[str] | None) -> None:
    """Refuse, as ``migrate status`` does, a group that exists in neither protocol and a topic
    of ``wanted`` the group has no offset for that exists nowhere (typos, most likely)."""
    if wanted is not None or zk.exists(zp.group_dir(group)) is None:
        kafka_before = read_kafka_offsets(admin, group)
        if not kafka_before:
            _require_group(zk, group, kafka_before, modern_group(admin, group)[1])
        if wanted is not None:
            known = ({tp.topic for tp in read_zk_offsets(zk, group, wanted)}
                     | {tp.topic for tp in kafka_before})
            _require_topics(group, wanted, known,
                            _topic_partitions(zk, admin, wanted - known))


def _plan_with_log_range(
    zk: KazooClient, admin: Any, bootstrap: str, src: Mapping[TopicPartition, int],
    dst: Mapping[TopicPartition, int], force: bool, timeout_ms: int,
    kafka: Mapping[str, Any] | None,
    log_range: Callable[[Sequence[TopicPartition]], LogRange] | None,
) -> tuple[list[CopyAction], str | None]:
    """:func:`plan_copy` of ``src`` over ``dst``, the brokers asked which topics and
    partitions exist and the log range of the partitions; and why the log range of a
    partition to write is unknown (None: known for all of them)."""
    # Offsets of deleted topics and partitions: nothing to resume, and the broker
    # refuses them. Which exist is the brokers' word where they gave one, in both
    # directions, as `migrate status` takes it: /brokers/topics may lag them (the bridge
    # behind, a rollback while it is down: partitions it does not list yet are live), or
    # still list what they deleted (status calls those topic_missing, partition_missing).
    # ZooKeeper's word stands for a topic the brokers did not answer for; its log range is
    # then unknown.
    parts_of = _topic_partitions(zk, admin, {tp.topic for tp in src})
    (starts, ends, range_error), described = _described_log_range(
        admin, bootstrap, sorted(src), timeout_ms, kafka, log_range)
    exists = {**parts_of, **described}
    missing = {t for t, parts in exists.items() if parts is None}
    gone = {tp for tp in src
            if (parts := exists.get(tp.topic)) is not None and tp.partition not in parts}
    actions = plan_copy(src, dst, src, force, missing, gone, log_starts=starts,
                        log_ends=ends)
    if range_error is not None and all(
            tp in starts and tp in ends
            for tp in (TopicPartition(a.topic, a.partition) for a in actions if a.writes)):
        range_error = None  # only partitions not written lack a range: not needed
    return actions, range_error


def _refuse_out_of_range(
    actions: Sequence[CopyAction], source: Store, range_error: str | None, force: bool
) -> None:
    """:class:`OutOfRangeError` when a real copy would write offsets outside their
    partition's log, or (unless ``force``) cannot check that they are inside."""
    refused = [a for a in actions if a.action == "out_of_range"]
    if refused:
        one = len(refused) == 1
        raise OutOfRangeError(
            f"{counted(len(refused), 'offset')} in {source} {'is' if one else 'are'} "
            f"outside {'its' if one else 'their'} partition's log "
            f"({fmt_out_of_range(refused)}): {OUT_OF_LOG_RESET}; reset "
            f"{'it' if one else 'them'} explicitly first (zkconsumer offsets reset), or "
            f"pass --force to copy {'it as it is' if one else 'them as they are'}; "
            "nothing was written"
        )
    if range_error is not None and not force:
        raise OutOfRangeError(
            f"cannot check that the offsets to copy are in their partitions' log range "
            f"({range_error}): run again once the brokers answer, or pass --force to copy "
            "without the check; nothing was written"
        )


def _write_and_verify(
    zk: KazooClient, admin: Any, group: str, source: Store, dest: Store,
    to_write: Mapping[TopicPartition, int], dst: Mapping[TopicPartition, int],
    probe: Callable[[], list[str]],
) -> None:
    """Write ``to_write`` to ``dest``, read it back, and check that no consumer ran
    meanwhile (the source unchanged, nobody live): MigrationError otherwise."""
    try:
        if dest == "kafka":
            write_kafka_offsets(admin, group, to_write)
        else:
            _write_zookeeper(zk, group, to_write, {tp: dst[tp] for tp in to_write
                                                   if tp in dst})
    except KeyboardInterrupt as e:
        e.add_note(f"interrupted while writing {counted(len(to_write), 'offset')} to "
                   f"{dest}: some may be written; run the same copy again (it writes "
                   "what differs), then `migrate status`")
        raise
    if dest == "kafka":
        now = read_kafka_offsets(admin, group, to_write)
    else:
        now = read_zk_offsets(zk, group, {tp.topic for tp in to_write})
    wrong = {tp: now.get(tp) for tp, off in to_write.items() if now.get(tp) != off}
    if wrong:
        raise MigrationError(
            f"read-back after the copy differs on {fmt_tps(wrong)}: "
            + ", ".join(f"{tp.topic}:{tp.partition}={v}" for tp, v in
                        sorted(wrong.items())[:4])
        )
    # The last idle check was before the offsets were read: a consumer that started
    # since (and committed to the source, or to the destination before the write
    # overwrote it) would leave a stale copy that looks complete.
    source_now = (read_zk_offsets(zk, group, {tp.topic for tp in to_write})
                  if source == "zookeeper" else read_kafka_offsets(admin, group, to_write))
    moved = {tp: source_now.get(tp) for tp, off in to_write.items()
             if source_now.get(tp) != off}
    live = probe()
    if moved or live:
        what = ([f"{source} offsets moved during the copy on {fmt_tps(moved)}"]
                if moved else []) + ([f"live now: {_fmt_live(live)}"] if live else [])
        raise MigrationError(
            f"a consumer ran while the copy wrote ({'; '.join(what)}): the "
            f"{len(to_write)} offsets written to {dest} may be stale; stop every "
            "consumer of the group and run the copy again")
