"""A deleted session takes its stream's chunks with it.

Chat ids are minted by clients, so a later session may take the id of a deleted one and,
with it, the same stream id. When a :class:`~helix_django.models.ChatSession` row is
deleted (the API's DELETE, the admin, a cascade from its owner), the stream's stored
chunks are purged once the deletion commits (``purge_stream``: the head stays, so nobody
ever reads the deleted conversation under a reused id, and sequences are never reused).
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models.signals import post_delete

from helix_django.errors import HelixError
from helix_django.models import ChatSession
from helix_django.streams.registry import get_stream_manager

logger = logging.getLogger(__name__)


def purge_stream_now(stream_id: str) -> None:
    """Purge ``stream_id`` in the configured stream manager (sync callers); a failure is logged."""
    try:
        async_to_sync(get_stream_manager().purge_stream)(stream_id)
    except HelixError as exc:  # the session is gone either way: say so, never raise after its commit
        logger.error("could not purge the stream of a deleted session: %s", exc.code)
    except RuntimeError as exc:  # called on a thread that runs an event loop (no way to wait here)
        logger.error("could not purge the stream of a deleted session: %s", type(exc).__name__)


def _on_session_deleted(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    stream_id = instance.stream_id
    transaction.on_commit(lambda: purge_stream_now(stream_id), using=using)


def connect() -> None:
    """Connect the receiver (idempotent: a dispatch uid)."""
    post_delete.connect(_on_session_deleted, sender=ChatSession, dispatch_uid="helix_purge_deleted_session_stream")
