"""A run streaming through the Redis stream manager while Redis restarts (AOF on)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.test import override_settings

from helix_django import store
from helix_django.errors import StreamConnectionError
from helix_django.models import Message, Run
from helix_django.runtime.executor import LocalExecutor
from helix_django.streams import get_stream_manager

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPTED = "helix_django.runtime.providers.scripted.ScriptedProvider"
REPLY = " ".join(f"word{i}" for i in range(80))
TIMEOUT = 30


def helix() -> dict:
    """HELIX of the test: the Redis stream manager on the private server (``CACHES["helix_private"]``)."""
    return {
        "STREAM_MANAGERS": {
            "default": {
                "BACKEND": "helix_django.streams.redis.RedisStreamManager",
                "OPTIONS": {"CONNECTION_ALIAS": "helix_private", "KEY_PREFIX": f"helix-test:{uuid.uuid4().hex}"},
            }
        },
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": SCRIPTED, "OPTIONS": {"TEXT": REPLY, "PACE_TPS": 40}},
                "MODEL": "scripted-1",
                "SYSTEM_PROMPT": "You are a test assistant.",
                "TOOLS": [],
            }
        },
        "FLUSH_INTERVAL_MS": 2,
    }


async def test_the_run_goes_on_and_a_reader_resumes_from_its_cursor_with_nothing_lost_or_repeated(private_redis):
    executor = LocalExecutor()
    try:
        with override_settings(HELIX=helix()):
            session, _ = await store.aget_or_create_session(f"sess-{uuid.uuid4().hex[:8]}")
            message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
            handle = await executor.execute(session=session, messages=[message])
            manager = get_stream_manager()
            reader = await manager.create_resumable_reader(
                session.stream_id, from_sequence=handle.from_sequence, wait_for_live=True
            )
            received: list[tuple[int, dict]] = []
            while sum(c["type"] == "text-delta" for _s, c in received) < 5:
                received.append(await asyncio.wait_for(reader.__anext__(), TIMEOUT))

            await asyncio.to_thread(private_redis.stop)
            assert executor.is_local(handle.run_id)  # the run is still generating while Redis is down
            with pytest.raises(StreamConnectionError):  # typed, never "ended" or "absent"
                while True:
                    received.append(await asyncio.wait_for(reader.__anext__(), TIMEOUT))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(private_redis.start)

            resumed = await manager.create_resumable_reader(session.stream_id, from_sequence=reader.current_sequence)
            assert resumed is not None
            received += [item async for item in resumed]

            sequences = [s for s, _c in received]
            assert sequences == sorted(set(sequences))
            assert sequences == list(range(handle.from_sequence + 1, sequences[-1] + 1))
            assert "".join(c["delta"] for _s, c in received if c["type"] == "text-delta") == REPLY
            assert [c["type"] for _s, c in received][-1] == "helix-run-end"
            assert await asyncio.wait_for(executor.wait(handle.run_id), TIMEOUT) == "completed"
            run = await Run.objects.aget(pk=handle.run_id)
            assert run.status == "completed"
            row = await Message.objects.aget(session_id=session.id, ui_id=run.response_message_id)
            assert "".join(p.get("text", "") for p in row.parts if p["type"] == "text") == REPLY
            await manager.aclose()
    finally:
        await asyncio.to_thread(executor.close)
