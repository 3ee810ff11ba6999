"""Lease-owner ids of this process, and whether another owner's process is certainly gone.

A run's lease names the process executing it: ``[<kind>:]<host>:<pid>:<token>``, each
token minted by :func:`lease_owner_id` and remembered by the process that minted it. A
relaunch scan must not wait for a lease to expire when its holder is certainly gone (000,
"Recovery on app relaunch": did the process exit?); it is when, on this same host,

- no process has the owner's pid any more, or
- the pid is this process's own but the token is not one this process minted: the
  predecessor of a restarted container, which got the same pid (often 1).

Anything else (another host, a live pid, a pid this process cannot signal) is left to the
lease, and so is a hand-off lease (kind ``handoff``): the run waits in a durable task
queue, which outlives the web process that queued it. Two hosts sharing one hostname and
one pid namespace would defeat the rule; give each server its own hostname.
"""

from __future__ import annotations

import os
import socket
import uuid

HOST = socket.gethostname()

#: Kinds of lease whose holder's death does not end the run: it waits in a durable queue.
QUEUED_KINDS = frozenset({"handoff"})

_minted: set[str] = set()
"""Tokens of the owner ids this process minted (a forked child starts with none)."""

os.register_at_fork(after_in_child=_minted.clear)


def lease_owner_id(kind: str = "") -> str:
    """Return a new lease-owner id of this process: ``[<kind>:]<host>:<pid>:<token>`` (at most 128 characters)."""
    token = uuid.uuid4().hex[:8]
    _minted.add(token)
    prefix = f"{kind}:" if kind else ""
    return f"{prefix}{HOST}:{os.getpid()}:{token}"[:128]


def _parse(owner: str) -> tuple[str, str, int, str] | None:
    """Return ``(kind, host, pid, token)`` of an owner id, or None when it is not one."""
    parts = owner.split(":")
    if len(parts) == 3:
        parts = ["", *parts]
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2]), parts[3]


def is_certainly_gone(owner: str) -> bool:
    """Whether the process that holds leases as ``owner`` has certainly ended (the module's rule)."""
    parsed = _parse(owner)
    if parsed is None:
        return False
    kind, host, pid, token = parsed
    if kind in QUEUED_KINDS or host != HOST or pid <= 0:
        return False
    if pid == os.getpid():
        return token not in _minted
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's process): not certain
        return False
    return False
