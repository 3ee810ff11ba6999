"""Stream writes that join a caller's database transaction: an optional capability of a stream manager.

A manager whose streams live in a database the store also writes offers
``manager.transactions``: a :class:`TransactionalWrites` through which a run's start and
its stream claim, or a run's last step, its terminal commit and its stream's end, are one
transaction and one thread hop. Every other manager has ``transactions = None``; callers
then write through the manager's async operations after their own commit.

The methods here run on the ORM's thread, inside a transaction the caller opened on
:attr:`TransactionalWrites.database`. Once that transaction committed, the caller hands
what they returned back on the event loop (:meth:`~TransactionalWrites.claimed`,
:meth:`~TransactionalWrites.wrote`), which tells readers.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from helix_django.streams.info import Chunk, StreamInfo


@dataclasses.dataclass(frozen=True)
class WrittenInTransaction:
    """A stream write made inside a caller's transaction (:meth:`TransactionalWrites.append`).

    ``sequences`` of the chunks stored (none for a status change), ``info`` the stream as
    the write left it, ``payloads`` what the manager keeps of each chunk (its stored JSON,
    or the chunk its readers share): what readers are told once the transaction committed
    (:meth:`TransactionalWrites.wrote`).
    """

    sequences: list[int]
    info: StreamInfo | None
    payloads: list[Any]


class TransactionalWrites(abc.ABC):
    """Claims, appends and ends made inside the caller's transaction on database :attr:`database`.

    Each write is fenced as the manager's async operation of the same name: it raises
    StreamFenceError, and the caller's transaction rolls back.
    """

    database: str
    """The Django database alias the streams are written to: only its transactions can be joined."""

    def joins(self, alias: str) -> bool:
        """Whether writes can join a transaction of database ``alias``."""
        return alias == self.database

    @abc.abstractmethod
    def claim(self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk]) -> Any:
        """Claim the stream and store ``chunks`` (an opening claim); return a token for :meth:`claimed`.

        As ``BaseStreamManager.claim_and_append``: a stream already closed for the run
        refuses it (StreamFenceError, ``cause: run_ended``).
        """

    @abc.abstractmethod
    def claimed(self, stream_id: str, token: Any) -> tuple[StreamInfo, list[int]]:
        """Once :meth:`claim`'s transaction committed, on the event loop: wake readers; return (info, sequences)."""

    @abc.abstractmethod
    def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> WrittenInTransaction:
        """Store ``chunks``; once the transaction committed, pass every write, in order, to :meth:`wrote`."""

    @abc.abstractmethod
    def end(self, stream_id: str, run_id: str, *, end_status: str) -> WrittenInTransaction:
        """Mark the stream ``ended`` with ``end_status`` (see :meth:`append`)."""

    @abc.abstractmethod
    def wrote(self, stream_id: str, writes: Sequence[WrittenInTransaction]) -> None:
        """Once the transaction of ``writes`` committed (on the event loop): tell readers, wake them."""

    @abc.abstractmethod
    def get_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's info on the ORM's thread (None when it does not exist).

        Raises StreamConnectionError for a failed read.
        """


class _HasTransactions(Protocol):
    transactions: TransactionalWrites | None


def joined_transactions(manager: _HasTransactions, alias: str) -> TransactionalWrites | None:
    """Return ``manager.transactions`` when its writes can join a transaction of database ``alias``, else None."""
    transactions = manager.transactions
    if transactions is not None and transactions.joins(alias):
        return transactions
    return None
