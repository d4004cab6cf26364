"""ZooKeeper transactions of the tools: ACLs of new znodes, guards, chunked commits."""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError

from zkconsumer._errors import AdminError, GroupActiveError, ZooKeeperChangedError
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children, transaction_cause
from zkconsumer.zk.session import ACL_ENV, AUTH_ENV, _no_chroot, acl_refused

#: The most operations put in one ZooKeeper transaction. A multi request must stay under
#: ZooKeeper's jute.maxbuffer (1 MB by default); an op here is a path plus a short payload,
#: ~100-300 bytes, so 1000 leaves a wide margin. Bigger imports are split (not atomic then).
MAX_TRANSACTION_OPS = 1000



def full_acl(zk: KazooClient, path: str) -> list[Any] | None:
    """``path``'s ACL as it can be given to a new znode; None when it cannot be read in full:
    refused, or redacted (ZooKeeper shows a digest id as ``user:x`` to a client without the
    ADMIN permission; a znode created with that would lock its user out)."""
    try:
        acl = list(zk.get_acls(path)[0])
    except NoAuthError:
        return None
    if any(a.id.scheme == "digest" and a.id.id.endswith(":x") for a in acl):
        return None
    return acl


def acl_unreadable(path: str, why: str) -> str:
    """The message for an ACL :func:`full_acl` could not read that ``why`` needs."""
    return (f"cannot {why} with the ACL of {path}: reading it in full needs the ADMIN "
            f"permission there; set {AUTH_ENV} to credentials that have it, or {ACL_ENV} to "
            "the ACL the znodes should get")


def members_guard(tx: Any, zk: KazooClient, group: str, what: str, written: int = 0) -> None:
    """Add ops that make ``tx`` fail if a member registers in ``group`` before it commits.

    ZooKeeper has no "check children" op; deleting ``/consumers/G/ids`` fails with NotEmpty
    once a member is registered (and creating it fails if it appeared), so the pair
    delete+create (or create+delete) leaves the tree as it was and makes the whole
    transaction conditional on the group still having no member.
    """
    ids = zp.ids_dir(group)
    if zk.exists(ids) is not None:
        acl = full_acl(zk, ids)  # made again as it was, not with the tools' ACL
        if acl is None and not zk.default_acl:
            # kazoo's fallback is world-open: the group's protection would go.
            raise AdminError(_failed(what, acl_unreadable(
                ids, f"re-create {ids} (the guard against members registering meanwhile)"),
                written_count(written)))
        tx.delete(ids)
        tx.create(ids, b"", acl=acl)
    elif zk.exists(zp.group_dir(group)) is not None:
        tx.create(ids, b"")
        tx.delete(ids)


#: Transaction operations (kazoo's request types) as :func:`acl_refused` names them.
_TX_VERBS = {"Create": "create", "Delete": "delete", "SetData": "write", "CheckVersion": "read"}


#: Failures a concurrent change explains (planning again from a fresh read fixes them).
_RACES = ("NodeExistsError", "NotEmptyError", "BadVersionError", "NoNodeError")


def commit_transaction(tx: Any, what: str, written: int = 0) -> None:
    """Commit; on failure (nothing of ``tx`` applied) raise :class:`ZooKeeperChangedError`
    naming the first cause when a concurrent change explains it.

    Callers retry from their checks, which then raise the precise error (a member that
    registered meanwhile gives GroupActiveError). Failures retrying cannot help are raised
    at once with the path and the cause: an operation refused by an ACL
    (:class:`AclRefusedError`), a create under a chroot that does not exist, or any other
    refusal (AdminError). ``written``: operations of earlier transactions of the same
    command, which the message must not deny. ``what``: the operation, said first in the
    message (:func:`_failed`); empty for offsets import and reset, whose command the tools'
    prefix names.
    """
    results = tx.commit()
    told = written_count(written)
    client = tx.client
    cause = transaction_cause(tx.operations, results)
    if cause is not None:
        op, result = cause
        verb = _TX_VERBS.get(type(op).__name__, "change")
        if isinstance(result, NoAuthError):
            raise acl_refused(client, verb, op.path, what, told)
        name = type(result).__name__
        path = client.unchroot(op.path)
        if (isinstance(result, NoNodeError) and verb == "create"
                and path.rsplit("/", 1)[0] == "" and client.chroot):
            # Under the root of a chroot: the chroot itself is missing (a typo in
            # --zookeeper); no retry creates it.
            raise AdminError(_failed(
                what, f"ZooKeeper refused to create {path}: {_no_chroot(client.chroot)} "
                f"({name})", told))
        if name not in _RACES:
            raise AdminError(_failed(what, f"ZooKeeper refused to {verb} {path} ({name})", told))
        raise ZooKeeperChangedError(_failed(what, f"{path} changed meanwhile ({name})", told),
                                    written)
    if any(isinstance(r, Exception) for r in results):
        raise ZooKeeperChangedError(_failed(what, "ZooKeeper changed meanwhile", told), written)


def _failed(what: str, text: str, told: str) -> str:
    """A failed write's message: "WHAT: TEXT; TOLD", without "WHAT: " when ``what`` is
    empty (the tools' offsets commands: their prefix names the command)."""
    return f"{what}: {text}; {told}" if what else f"{text}; {told}"


def written_count(n: int) -> str:
    """What a failed write left behind, for its message."""
    if not n:
        return "nothing written"
    return (f"{n} operation{'s' if n != 1 else ''} of it written before this failure: "
            f"one this big is split into transactions of {MAX_TRANSACTION_OPS} operations")


def require_no_members(zk: KazooClient, group: str, action: str, hint: str = "") -> None:
    ids = sorted(children(zk, zp.ids_dir(group)))
    if ids:
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        raise GroupActiveError(
            f"refusing to {action}: group {group!r} has {len(ids)} registered "
            f"member{'s' if len(ids) != 1 else ''} ({shown}){hint}"
        )


