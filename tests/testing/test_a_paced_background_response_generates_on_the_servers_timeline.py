"""A paced background response of the fake OpenAI server generates over time, on the server, client or not.

Seen: background responses of ``FakeOpenAI`` were precomputed and complete at once, so a
re-attach after a restart could never be shown live. With ``Reply(interval_seconds=...)``
event ``i`` is due ``i * interval`` after creation; streams send each event when due,
``retrieve`` says ``in_progress`` until the last one is due, ``cancel`` stops it.
Exercised with the real ``openai`` SDK.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from openai import AsyncOpenAI

from helix_django.testing import FakeOpenAI, Reply

pytestmark = [pytest.mark.timeout(30)]

TEXT = " ".join(f"w{i}" for i in range(12))
INTERVAL = 0.1


async def _create(client: AsyncOpenAI) -> tuple[str, int]:
    """Start a background response; read its create stream up to the first text delta, return (id, sequence)."""
    stream = await client.responses.create(model="m", input="hi", stream=True, background=True, store=True)
    response_id = ""
    async for event in stream:
        if event.type == "response.created":
            response_id = event.response.id
        if event.type == "response.output_text.delta":
            await stream.close()
            return response_id, event.sequence_number
    raise AssertionError("no delta")


def test_a_paced_response_streams_each_event_when_due_and_completes_on_its_timeline():
    async def scenario() -> None:
        with FakeOpenAI() as server:
            server.replies.append(Reply(text=TEXT, interval_seconds=INTERVAL))
            client = AsyncOpenAI(base_url=server.base_url, api_key="test")
            response_id, sequence = await _create(client)
            assert (await client.responses.retrieve(response_id)).status == "in_progress"
            await asyncio.sleep(0.35)  # no client connected: the server generates on
            started = time.monotonic()
            arrivals: list[float] = []
            deltas: list[str] = []
            stream = await client.responses.retrieve(response_id, stream=True, starting_after=sequence)
            async for event in stream:
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                    arrivals.append(time.monotonic() - started)
            assert "".join(deltas) == TEXT[len("w0 ") :]
            # The ones already due come at once, the rest one interval apart (live, not one block).
            assert arrivals[0] < INTERVAL
            assert arrivals[-1] - arrivals[0] > 2 * INTERVAL, arrivals
            final = await client.responses.retrieve(response_id)
            assert final.status == "completed" and final.output_text == TEXT
            await client.close()

    asyncio.run(scenario())


def test_a_cancelled_paced_response_sends_no_later_event():
    async def scenario() -> None:
        with FakeOpenAI() as server:
            server.replies.append(Reply(text=TEXT, interval_seconds=INTERVAL))
            client = AsyncOpenAI(base_url=server.base_url, api_key="test")
            response_id, sequence = await _create(client)
            assert (await client.responses.cancel(response_id)).status == "cancelled"
            stream = await client.responses.retrieve(response_id, stream=True, starting_after=sequence)
            assert [event async for event in stream] == []
            assert (await client.responses.retrieve(response_id)).status == "cancelled"
            await client.close()

    asyncio.run(scenario())


def test_an_unpaced_response_completes_at_once():
    async def scenario() -> None:
        with FakeOpenAI() as server:
            server.replies.append(Reply(text=TEXT))
            client = AsyncOpenAI(base_url=server.base_url, api_key="test")
            response_id, _sequence = await _create(client)
            assert (await client.responses.retrieve(response_id)).status == "completed"
            await client.close()

    asyncio.run(scenario())
