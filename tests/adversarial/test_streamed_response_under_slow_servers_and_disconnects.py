"""Adversarial tests of StreamedResponse (frames pumped by one task, heartbeats by another).

Driven through its ASGI interface (``send``/``receive`` callables of a server that is
slow, or whose client leaves): frames never interleave with keep-alives, a failing
frame source still ends the response, and a disconnect, even in the middle of a send,
ends everything the response started.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django.transport.http import StreamedResponse
from helix_django.transport.wire_ui import KEEP_ALIVE, STREAM_OPEN


class SlowServer:
    """ASGI ``send``/``receive`` of a slow client: every send takes a few loop turns."""

    def __init__(self, *, disconnect_after: float | None = None, block_sends_after: int | None = None) -> None:
        self.messages: list[dict] = []
        self.sending = 0
        self.overlaps = 0
        self.disconnect_after = disconnect_after
        self.block_sends_after = block_sends_after
        self.blocked = asyncio.Event()

    async def send(self, message: dict) -> None:
        self.sending += 1
        self.overlaps += self.sending > 1
        try:
            if self.block_sends_after is not None and len(self.messages) >= self.block_sends_after:
                self.blocked.set()
                await asyncio.Event().wait()  # a client that stopped reading
            for _ in range(3):
                await asyncio.sleep(0)
            self.messages.append(message)
        finally:
            self.sending -= 1

    async def receive(self) -> dict:
        if self.disconnect_after is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.disconnect_after)
        return {"type": "http.disconnect"}

    @property
    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.messages if m["type"] == "http.response.body"]


def frame(n: int) -> bytes:
    return f'id: {n}\ndata: {{"n": {n}}}\n\n'.encode()


async def test_heartbeats_racing_frames_never_interleave_and_nothing_follows_the_end():
    server = SlowServer()
    closed = []

    async def frames():
        try:
            for n in range(200):
                if n % 20 == 0:
                    await asyncio.sleep(0.003)  # idle: heartbeats are due
                yield frame(n)
        finally:
            closed.append(True)

    response = StreamedResponse(server.send, server.receive, heartbeat_seconds=0.001)
    await asyncio.wait_for(response.run(200, [], frames()), 10)
    bodies = server.bodies
    assert server.overlaps == 0
    assert bodies[0] == STREAM_OPEN and bodies[-1] == b"" and server.messages[-1]["more_body"] is False
    assert [b for b in bodies[1:-1] if b != KEEP_ALIVE] == [frame(n) for n in range(200)]
    assert KEEP_ALIVE in bodies
    assert closed == [True] and not response.disconnected


async def test_a_failing_frame_source_still_ends_the_response(caplog):
    server = SlowServer()

    async def frames():
        yield frame(1)
        raise RuntimeError("assistant text that must not be logged")

    response = StreamedResponse(server.send, server.receive, heartbeat_seconds=5)
    await asyncio.wait_for(response.run(200, [], frames()), 5)
    assert server.bodies == [STREAM_OPEN, frame(1), b""]
    assert server.messages[-1]["more_body"] is False
    assert "must not be logged" not in caplog.text


async def test_a_disconnect_while_a_send_is_stuck_ends_every_task_and_closes_the_source():
    server = SlowServer(disconnect_after=0.05, block_sends_after=4)
    closed = []

    async def frames():
        try:
            n = 0
            while True:
                n += 1
                yield frame(n)
        finally:
            closed.append(True)

    before = len(asyncio.all_tasks())
    response = StreamedResponse(server.send, server.receive, heartbeat_seconds=0.01)
    await asyncio.wait_for(response.run(200, [], frames()), 5)
    assert response.disconnected and server.blocked.is_set()
    assert closed == [True]
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before
    assert all(m.get("more_body", True) for m in server.messages)  # no end sent to a gone client


async def test_an_idle_open_response_parks_one_task_beside_its_own():
    """Issue 23 (idle memory per response): the disconnect watcher is the only task a response adds;
    frames are pumped by the response's own task and keep-alives come from a timer."""
    server = SlowServer()
    parked = asyncio.Event()

    async def frames():
        yield frame(1)
        parked.set()
        await asyncio.Event().wait()  # a quiet run: nothing to send for a while

    before = len(asyncio.all_tasks())
    response = StreamedResponse(server.send, server.receive, heartbeat_seconds=0.05)
    running = asyncio.ensure_future(response.run(200, [], frames()))
    await asyncio.wait_for(parked.wait(), 5)
    assert len(asyncio.all_tasks()) == before + 2  # the response's own task and its watcher
    await asyncio.sleep(0.13)
    assert server.bodies.count(KEEP_ALIVE) >= 1  # keep-alives still go out while idle
    assert len(asyncio.all_tasks()) == before + 2
    running.cancel()  # the server's cancellation propagates (it is not a disconnect)
    with pytest.raises(asyncio.CancelledError):
        await running
    assert len(asyncio.all_tasks()) == before and not response.disconnected
