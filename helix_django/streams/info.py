"""The values of the stream contract: chunks, stream statuses, :class:`StreamInfo` (DESIGN, "Stream manager contract").

A chunk is a JSON-able dict with a ``"type"`` (an AI SDK UI message stream chunk type or
a ``helix-*`` internal type) and the reserved metadata keys ``_run`` (run id),
``_attempt`` (attempt id) and ``_step``. A stored chunk is ``(sequence, chunk)``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from helix_django.errors import StreamConnectionError

logger = logging.getLogger("helix_django.streams.base")

Chunk = dict[str, Any]
StoredChunk = tuple[int, Chunk]

ACTIVE, PAUSED, ENDED, FAILED = "active", "paused", "ended", "failed"
TERMINAL_STREAM_STATUSES = frozenset({PAUSED, ENDED, FAILED})
RUN_ENDED = "run_ended"
"""The StreamFenceError cause of an opening claim refused by a stream already closed for its run."""


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """The stream's own state (002, "Stream status"): never a run's liveness."""

    stream_id: str
    status: str
    """``active``, ``paused``, ``ended`` or ``failed``."""
    head_sequence: int
    """Highest sequence assigned so far (0 for a stream with no chunk)."""
    run_id: str
    """The run holding the claim ('' when none)."""
    epoch: int = 0
    """Fencing token of the claim: a claim with a lower epoch is refused."""
    end_status: str = ""
    """For ``ended``: how the run ended (``completed``, ``cancelled``, ``interrupted``)."""
    error: dict[str, Any] | None = None
    """For ``failed``: the typed error body."""

    def with_head(self, head_sequence: int) -> StreamInfo:
        """Return this info with ``head_sequence`` moved (half the cost of ``dataclasses.replace``: the append path)."""
        return StreamInfo(
            self.stream_id, self.status, head_sequence, self.run_id, self.epoch, self.end_status, self.error
        )


class ReadableStreams(Protocol):
    """What a :class:`~helix_django.streams.reader.ResumableReader` reads through: any stream manager."""

    @property
    def reads_are_current(self) -> bool:
        """Whether a read's info is current when it returns (see ``BaseStreamManager.reads_are_current``)."""

    def subscribe(self, stream_id: str) -> Any:
        """Return a waiter fired by the next write or status change of ``stream_id``."""

    def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> Awaitable[tuple[list[StoredChunk], StreamInfo | None]]:
        """Return up to ``limit`` chunks with sequence > ``after`` and the stream's info."""


def raise_connection_error(exc: BaseException, what: str) -> StreamConnectionError:
    """Log ``exc`` (type only) and return a typed retryable StreamConnectionError for it."""
    logger.warning("stream backend %s failed: %s", what, type(exc).__name__)
    return StreamConnectionError(cause=what)
