"""A failed database read is typed and retryable, never "absent" (002, CP-28)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from helix_django.errors import StreamConnectionError
from helix_django.models import Stream
from helix_django.streams.database import DatabaseStreamManager

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def _rename(old: str, new: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")


async def test_failed_read_raises_a_typed_retryable_error():
    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("s1", "run_a", epoch=1)
    table = Stream._meta.db_table
    await sync_to_async(_rename)(table, "helix_stream_gone")
    try:
        with pytest.raises(StreamConnectionError) as excinfo:
            await manager.get_info("s1")
        assert excinfo.value.is_retryable
        assert excinfo.value.to_body()["code"] == "transport_stream_connection"
        with pytest.raises(StreamConnectionError):
            await manager.read_after("s1", 0)
        with pytest.raises(StreamConnectionError):
            await manager.create_resumable_reader("s1")
    finally:
        await sync_to_async(_rename)("helix_stream_gone", table)
    assert (await manager.get_info("s1")).run_id == "run_a"
