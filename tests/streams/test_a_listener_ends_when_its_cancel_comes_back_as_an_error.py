"""A loop that outlives its errors still ends when its cancel comes back as a library's error.

channels_redis and redis-py can answer a cancel that cuts a read with a ConnectionError.
The channel-layer listener retried on it as on an outage, so its task never ended and a
loop's shutdown (pytest-asyncio's, a server's) waited on it forever: the PostgreSQL pass's
300 s teardown timeout in ``tests/scale/test_tasks_executor.py``, with "channel layer
receive failed: ConnectionError" logged at teardown.
"""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest

from helix_django.streams.broadcast import _LoopListener

#: Python 3.10 has no ``Task.cancelling()``: a cancel turned into an error cannot be told there.
pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11's")


class CutByCancelLayer:
    """A channel layer whose receive, once cancelled, raises ConnectionError as a cut Redis read does."""

    def __init__(self) -> None:
        self.receives = 0

    async def new_channel(self) -> str:
        return "listener-channel"

    async def receive(self, channel: str) -> dict:
        self.receives += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("Connection closed by server.") from None
        return {}


async def test_the_channel_layer_listener_ends_when_its_cancel_comes_back_as_a_connection_error():
    layer = CutByCancelLayer()
    broadcaster = SimpleNamespace(layer=layer, notifier_wake_all=lambda: None, notifier=None)
    listener = _LoopListener(broadcaster, asyncio.get_running_loop())
    await listener.ready.wait()
    await asyncio.sleep(0)
    assert layer.receives == 1
    listener.task.cancel()
    done, _pending = await asyncio.wait({listener.task}, timeout=5)
    assert listener.task in done and listener.task.cancelled()
    assert layer.receives == 1  # never retried as an outage
