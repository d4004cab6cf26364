"""``offsets export`` and ``offsets import``, and the offsets file formats.

The legacy ExportZkOffsets / ImportZkOffsets line format
(``/consumers/G/offsets/T/P:offset``) and the JSON list ``offsets export --json`` writes; a
whole file is validated before anything is written (:class:`~zkconsumer._errors.OffsetFileError`
lists every bad line). An import writes in one ZooKeeper transaction when it fits
(:data:`~zkconsumer.zk.transactions.MAX_TRANSACTION_OPS`), refused while a group has
registered members unless forced, and in Kafka too for the groups with offsets there
(:mod:`zkconsumer.ops.kafka_offsets`). :func:`_import_zookeeper` is also the write of
``offsets reset``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._config_keys import JAVA_INT_MAX
from zkconsumer._errors import AdminError, OffsetFileError, ZkDataError, ZooKeeperChangedError
from zkconsumer._types import TopicPartition
from zkconsumer.ops.brokers import _log_end_offsets, _reachable_brokers, _reason
from zkconsumer.ops.common import Progress, counted
from zkconsumer.ops.group_reads import (
    _check_legal_name,
    _partitions_unknown,
    _read_offsets,
    _read_registry,
    _require_group,
    legal_name_problem,
)
from zkconsumer.ops.kafka_offsets import _ask_kafka, _commit_kafka, _kafka_writes, _KafkaPlan
from zkconsumer.ops.results import ImportChange, ImportResult, OffsetEntry
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children, get_many
from zkconsumer.zk.transactions import (
    MAX_TRANSACTION_OPS,
    commit_transaction,
    members_guard,
    require_no_members,
    written_count,
)

log = logging.getLogger("zkconsumer.admin")


def export_offsets(
    zk: KazooClient, groups: Sequence[str] | None = None, progress: Progress | None = None
) -> list[OffsetEntry]:
    """Every committed offset of ``groups`` (all groups when None), sorted.

    Unknown groups raise UnknownGroupError before anything is read.
    """
    if groups:
        for g in groups:
            _require_group(zk, g)
        selected = sorted(set(groups))
    else:
        selected = sorted(children(zk, zp.CONSUMERS))
    out: list[OffsetEntry] = []
    for i, group in enumerate(selected, 1):
        for tp, offset in _read_offsets(zk, group).items():
            out.append(OffsetEntry(group, tp.topic, tp.partition, offset))
        if progress is not None:
            progress(i, len(selected))
    return out


def format_offset_lines(entries: Iterable[OffsetEntry]) -> str:
    """The legacy export file: one ``/consumers/G/offsets/T/P:offset`` line per entry."""
    return "".join(f"{e.line}\n" for e in entries)


def parse_offset_lines(lines: Iterable[str], source: str = "input") -> list[OffsetEntry]:
    """Parse and validate a whole offsets file; raise OffsetFileError listing every bad line.

    Blank lines are skipped. The same path given twice with different offsets is an
    error (naming both lines); given twice with the same offset, it counts once.
    """
    problems: list[tuple[int, str]] = []
    checked = _EntryChecks()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            problem = _offset_text_problem(line.strip().rpartition(":")[2])
            if problem is not None:
                problems.append((n, problem))
                continue
            group, topic, partition, offset = zp.parse_offset_line(line)
            zp.offset_path(group, topic, partition)
        except ValueError:
            problems.append((n, f"not /consumers/<group>/offsets/<topic>/<partition>:<offset>: "
                                f"{line.strip()[:120]!r}"))
            continue
        problem = checked.add(n, OffsetEntry(group, topic, partition, offset))
        if problem is not None:
            problems.append((n, problem))
    if problems:
        raise OffsetFileError(source, problems)
    return checked.entries


def parse_offset_json(text: str, source: str = "input") -> list[OffsetEntry]:
    """Parse and validate what ``offsets export --json`` writes: a JSON list of objects
    with ``group``, ``topic``, ``partition`` and ``offset`` (other fields are ignored).
    OffsetFileError lists every bad entry by its number, from 1; the same checks as the
    lines get."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise OffsetFileError(source, [(e.lineno, f"not JSON: {e.msg}")]) from None
    if not isinstance(items, list):
        raise OffsetFileError(source, [(1, "not a JSON list of offsets (as `offsets export "
                                           "--json` writes)")])
    problems: list[tuple[int, str]] = []
    checked = _EntryChecks("entry")
    for n, item in enumerate(items, 1):
        entry, problem = _json_entry(item)
        if entry is not None:
            problem = checked.add(n, entry)
        if problem is not None:
            problems.append((n, problem))
    if problems:
        raise OffsetFileError(source, problems, where="entry")
    return checked.entries


def _json_entry(item: object) -> tuple[OffsetEntry | None, str | None]:
    fields = ("group", "topic", "partition", "offset")
    if not isinstance(item, dict) or any(f not in item for f in fields):
        return None, f"not an object with {', '.join(fields)}: {json.dumps(item)[:120]}"
    group, topic, partition, offset = (item[f] for f in fields)
    if not isinstance(group, str) or not isinstance(topic, str):
        return None, "group and topic must be strings"
    if not isinstance(partition, int) or isinstance(partition, bool) or not (
            0 <= partition <= JAVA_INT_MAX):
        return None, f"partition must be an integer from 0 to {JAVA_INT_MAX}, got {partition!r}"
    if not isinstance(offset, int) or isinstance(offset, bool):
        return None, f"offset must be an integer, got {offset!r}"
    problem = _offset_problem(offset)
    if problem is not None:
        return None, problem
    try:
        zp.offset_path(group, topic, partition)
    except ValueError as e:
        return None, str(e)
    return OffsetEntry(group, topic, partition, offset), None


class _EntryChecks:
    """The checks every parsed entry gets, whatever the format: legal names, and no path
    set twice to different offsets. Used by one parse call; no lock needed."""

    def __init__(self, where: str = "line") -> None:
        self._where = where
        self.entries: list[OffsetEntry] = []
        self._seen: dict[str, tuple[int, int]] = {}

    def add(self, n: int, entry: OffsetEntry) -> str | None:
        """Keep ``entry`` (line or entry ``n``), or say what is wrong with it."""
        illegal = (legal_name_problem(entry.group, "group")
                   or legal_name_problem(entry.topic, "topic"))
        if illegal is not None:  # offsets no consumer could ever read
            return illegal
        first = self._seen.get(entry.path)
        if first is not None:
            if first[1] != entry.offset:
                return (f"{entry.path} set again ({self._where} {first[0]} sets {first[1]}, "
                        f"this {self._where} {entry.offset})")
            return None
        self._seen[entry.path] = (n, entry.offset)
        self.entries.append(entry)
        return None


_SIGNED_INT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
_INT64_MAX = 2**63 - 1


def _offset_text_problem(text: str) -> str | None:
    """What is wrong with an offset written as decimal ``text`` (None when it is not a
    number at all: the line's own check says so)."""
    if _SIGNED_INT.fullmatch(text) is None:
        return None
    return _offset_problem(int(text))


def _offset_problem(offset: int) -> str | None:
    """Why ``offset`` cannot be committed, precisely, or None. -1 is the legacy consumer's
    "no offset", kept as it is."""
    if offset < -1:
        return (f"offset {offset} is negative: an offset is the next message's position, "
                "from 0 (only -1, 'no offset', is allowed below 0)")
    if offset > _INT64_MAX:
        return (f"offset {offset} does not fit in a signed 64-bit integer (the largest is "
                f"{_INT64_MAX})")
    return None


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


#: What refuses an import while a group has registered members: the action and the hint.
_IMPORT_REFUSAL = ("import offsets", "; pass --force to write anyway")


def import_offsets(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    *,
    force: bool = False,
    progress: Progress | None = None,
    dry_run: bool = False,
    bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
    zookeeper_only: bool = False,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None = None,
) -> ImportResult:
    """Write every entry's offset (creating znodes as needed) in one transaction, and in
    Kafka too for the groups that have offsets there.

    Refuses (GroupActiveError) when a group in ``entries`` has registered members, unless
    ``force``. More than :data:`MAX_TRANSACTION_OPS` operations are split into several
    transactions (``transactions`` in the result says how many). ``dry_run``: the same
    checks and plan, nothing written (it refuses what the real run would refuse).

    Kafka is asked which groups have committed offsets there (one OffsetFetch per group, to
    ``bootstrap`` or the brokers registered in ZooKeeper; ``kafka``: their security
    settings): members with ``offsets.storage=kafka`` resume from those, so such a group's
    offsets are committed in Kafka as well (after ZooKeeper's; ``kafka`` in the result),
    except those of partitions the broker registry does not have, which Kafka refuses.
    Refuses (:class:`KafkaGroupActiveError`) when such a group has active members in Kafka,
    whatever ``force``, and (:class:`KafkaUnknownError`) when Kafka cannot be asked, unless
    ``zookeeper_only``: ZooKeeper alone, Kafka not asked.

    Offsets of topics or partitions ``/brokers/topics`` does not have, and offsets past
    their partition's log end (read from the brokers, ``zookeeper_only`` or not;
    ``log_end_offsets`` (servers, partitions) replaces that read), are imported all the
    same and listed in the result (:func:`_import_checks`). Those of a topic whose
    ``/brokers/topics`` znode does not decode are imported unchecked, not committed in Kafka,
    with a warning logged naming the znode (:func:`_read_registry`).
    """
    groups = sorted({e.group for e in entries})
    for group in groups:
        _check_legal_name(group, "group")
    for topic in sorted({e.topic for e in entries}):
        _check_legal_name(topic, "topic")
    if not force:
        for group in groups:
            require_no_members(zk, group, *_IMPORT_REFUSAL)
    plan = _KafkaPlan() if zookeeper_only else _ask_kafka(zk, groups, bootstrap, kafka,
                                                          _IMPORT_REFUSAL[0])
    with plan:
        registry, undecodable = _read_registry(zk, {e.topic for e in entries})
        for topic, why in undecodable.items():
            kafka_too = any(e.topic == topic and e.group in plan.offsets for e in entries)
            log.warning("%s; its offsets are imported without checking its partitions or "
                        "log end%s", _partitions_unknown(topic, why),
                        ", and not committed in Kafka (counted as left out)"
                        if kafka_too else "")

        def exists(tp: TopicPartition) -> bool:
            known = registry.get(tp.topic)
            return known is not None and tp.partition in known

        writes, in_kafka = _kafka_writes(plan, entries, exists)
        topic_missing, partition_missing, above, error = _import_checks(
            zk, entries, registry, bootstrap, kafka, log_end_offsets)
        result = _import_zookeeper(zk, entries, groups, force, progress, dry_run)
        if not dry_run:
            _commit_kafka(plan, writes, "")
    return replace(result, kafka=in_kafka, topic_missing=topic_missing,
                   partition_missing=partition_missing, above_log_end=above,
                   log_end_error=error)


def _import_checks(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    registry: Mapping[str, list[int] | None],
    bootstrap: str | None,
    kafka: Mapping[str, Any] | None,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None,
) -> tuple[list[OffsetEntry], list[OffsetEntry], list[tuple[OffsetEntry, int]], str | None]:
    """The entries no member can resume from, as :class:`ImportResult` has them: of topics,
    of partitions the broker registry does not have, past the log end (read from the
    brokers), and why the log ends could not be read. Never a refusal: an import restores a
    backup, and its topics may be created again. Entries of a topic not in ``registry``
    (its znode does not decode: :func:`_read_registry`) are not checked."""
    topic_missing = [e for e in entries if e.topic in registry and registry[e.topic] is None]
    partition_missing = [e for e in entries if (known := registry.get(e.topic)) is not None
                         and e.partition not in known]
    present = [e for e in entries
               if (known := registry.get(e.topic)) is not None and e.partition in known]
    above: list[tuple[OffsetEntry, int]] = []
    error: str | None = None
    if present:
        reader = log_end_offsets or partial(_log_end_offsets, kafka=kafka)
        try:
            ends = reader(_reachable_brokers(zk, bootstrap, kafka),
                          sorted({TopicPartition(e.topic, e.partition) for e in present}))
        except Exception as e:  # said in the warning: not checked
            log.debug("log end offsets failed", exc_info=True)
            error = _reason(e)
        else:
            above = [(e, end) for e in present
                     if (end := ends.get(TopicPartition(e.topic, e.partition))) is not None
                     and e.offset > end]
    return topic_missing, partition_missing, above, error


def _import_zookeeper(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    groups: Sequence[str],
    force: bool,
    progress: Progress | None = None,
    dry_run: bool = False,
    refusal: tuple[str, str] = _IMPORT_REFUSAL,
) -> ImportResult:
    """The ZooKeeper part of :func:`import_offsets` (and of :func:`reset_offsets`): checked,
    planned and written, planned again from a fresh read when ZooKeeper changed meanwhile.
    ``refusal``: the action and hint of the refusal while a group has registered members
    (:func:`require_no_members`)."""
    written = 0
    for _ in range(3):
        if not force:
            for group in groups:
                require_no_members(zk, group, *refusal)
        try:
            return _import_once(zk, entries, groups, force, progress, dry_run, refusal)
        except ZooKeeperChangedError as e:
            written += e.written  # planned again: what is written now counts as unchanged
            continue
    raise AdminError(f"ZooKeeper kept changing; {written_count(written)}")


def _import_once(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    groups: Sequence[str],
    force: bool,
    progress: Progress | None,
    dry_run: bool = False,
    refusal: tuple[str, str] = _IMPORT_REFUSAL,
) -> ImportResult:
    paths = [e.path for e in entries]
    current = get_many(zk, paths)
    parents = sorted({a for p in paths for a in _ancestors(p)}, key=lambda a: (a.count("/"), a))
    present = {p for p, st in zip(parents, [zk.exists_async(p) for p in parents], strict=True)
               if st.get() is not None}
    ops: list[tuple[str, str, bytes]] = [("create", p, b"") for p in parents if p not in present]
    created = updated = unchanged = 0
    changes: list[ImportChange] = []
    for e in entries:
        payload = zp.encode_offset(e.offset)
        old = current[e.path]
        old_offset: int | None = None
        if old is None:
            ops.append(("create", e.path, payload))
            created += 1
            action: Literal["create", "update", "unchanged"] = "create"
        else:
            try:
                old_offset = zp.decode_offset(old, e.path)
            except ZkDataError:
                pass  # replaced; shown as none
            if old.strip() == payload:
                unchanged += 1
                action = "unchanged"
            else:
                ops.append(("set", e.path, payload))
                updated += 1
                action = "update"
        changes.append(ImportChange(e.group, e.topic, e.partition, e.offset, old_offset,
                                    action))
    guard_groups = [] if force else list(groups)
    chunks = [ops[i:i + MAX_TRANSACTION_OPS] for i in range(0, len(ops), MAX_TRANSACTION_OPS)]
    if dry_run:
        if len(chunks) == 1:
            # The guard's own checks (the ACL it must keep), on a transaction never sent.
            tx = zk.transaction()
            for group in guard_groups:
                members_guard(tx, zk, group, "")
        return ImportResult(list(entries), created, updated, unchanged, len(chunks),
                            changes=changes)
    if len(chunks) > 1 and not force:
        # Not atomic any more: check again just before writing.
        for group in groups:
            require_no_members(zk, group, *refusal)
        guard_groups = []
    done = 0
    try:
        for chunk in chunks:
            tx = zk.transaction()
            for group in guard_groups:
                members_guard(tx, zk, group, "", done)
            for op, path, payload in chunk:
                if op == "create":
                    tx.create(path, payload)
                else:
                    tx.set_data(path, payload)
            sending = len(chunk)
            commit_transaction(tx, "", done)
            done += len(chunk)
            sending = 0
            if progress is not None:
                progress(done, len(ops))
    except ZooKeeperChangedError:
        raise  # nothing of that transaction applied: planned again from a fresh read
    except Exception as e:
        # A ZooKeeper lost mid-commit leaves the transaction in flight applied or not; one
        # that answered (refused) applied nothing of it.
        in_flight = sending if isinstance(e, KazooException | KazooTimeoutError) else 0
        if done or in_flight:  # else its message says nothing was written
            e.add_note(partial_write_note(entries, ops, done, in_flight, refusal[0]))
        raise
    return ImportResult(list(entries), created, updated, unchanged, len(chunks),
                        changes=changes)


def partial_write_note(entries: Sequence[OffsetEntry], ops: Sequence[tuple[str, str, bytes]],
                       done: int, in_flight: int, action: str) -> str:
    """What a failed write of ``entries`` left in ZooKeeper, by group, and how to finish:
    ``done`` of ``ops`` were committed, the next ``in_flight`` may or may not have been."""
    index = {path: i for i, (_, path, _) in enumerate(ops)}
    by_group: dict[str, list[int]] = {}  # group -> [written, maybe, not written]
    for e in entries:
        i = index.get(e.path, -1)  # no operation: the offset was already that
        state = 0 if i < done else 1 if i < done + in_flight else 2
        by_group.setdefault(e.group, [0, 0, 0])[state] += 1
    written = sum(c[0] for c in by_group.values())
    maybe = sum(c[1] for c in by_group.values())

    def groups(state: int) -> str:
        named = [f"{g}" if c[state] == sum(c) else f"{g} ({c[state]} of {sum(c)})"
                 for g, c in sorted(by_group.items()) if c[state]]
        shown = ", ".join(named[:6]) + (f" and {len(named) - 6} more" if len(named) > 6
                                        else "")
        return f" (group{'s' if len(named) != 1 else ''} {shown})" if named else ""

    parts = [f"{action} failed part way: {counted(written, 'offset')} of {len(entries)} "
             f"written{groups(0)}"]
    if maybe:
        parts.append(f"{counted(maybe, 'offset')} in the transaction in flight, written "
                     f"or not{groups(1)}")
    left = len(entries) - written - maybe
    parts.append(f"{counted(left, 'offset')} not written{groups(2)}")
    again = (f"; {action} again to finish: a rerun writes the same offsets, those already "
             "written stay as they are")
    if action == _RESET_ACTION:
        again += " (but a --shift-by would shift them again: give the offsets with --to)"
    return "; ".join(parts) + again


#: The action of ``offsets reset``'s write (its refusal's, :mod:`zkconsumer.ops.reset`).
_RESET_ACTION = "reset offsets"
