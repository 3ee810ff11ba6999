"""Backpressure under daphne: an application's ``send`` waits while its client does not read.

Under uvicorn, ASGI ``send`` waits while the client's socket buffer is full. daphne's never
waits: Twisted buffers whatever the application writes, so a client that opens a long
replay (a resume from the start of a long run, the raw stream route from sequence 0, a
WebSocket resume) and never reads made the process hold the whole replay, per client
(four such clients of an 8 MB stream: +36 MB, docs/deploy.md, "A client that stops
reading"). Here daphne's ``send`` waits as uvicorn's does, through Twisted's own flow
control: a push producer (:class:`SendGate`) registered on the response (HTTP) or on the
connection's transport (WebSocket) is paused by Twisted when the transport's buffer passes
its 64 KiB and resumed once it drained; a ``send`` made while it is paused returns once it
is resumed, or once the client is gone.

Like :mod:`.forms`, applied by :func:`helix_django.contrib.daphne.apply` (the app's ``ready()``)
only in a process that runs daphne (``daphne.server`` imported), to every ASGI application
daphne serves there, the host's own views included.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from typing import Any

#: How often a ``send`` waiting for a paused client checks that the client is still connected (seconds).
GONE_POLL_SECONDS = 1.0
GATE = "_helix_send_gate"
"""The attribute of daphne's protocol object that holds its :class:`SendGate`."""


class SendGate:
    """A Twisted push producer (``IPushProducer``) whose pause makes the next ``send`` wait.

    Twisted calls ``pauseProducing`` when the transport's write buffer is full and
    ``resumeProducing`` once it drained, on the event loop's thread (daphne runs Twisted's
    asyncio reactor). ``stopProducing`` (the connection is going away) opens it for good.
    """

    def __init__(self, *, paused: bool, forward: Any = None) -> None:
        self._open = asyncio.Event()
        if not paused:
            self._open.set()
        self._forward = forward
        """The producer registered before this gate (a WebSocket's HTTP channel): told everything too."""

    @property
    def is_paused(self) -> bool:
        """Whether the client's buffer is full (a ``send`` now waits)."""
        return not self._open.is_set()

    def pauseProducing(self) -> None:  # noqa: N802 (Twisted's interface)
        """The transport's buffer is full."""
        self._open.clear()
        if self._forward is not None:
            self._forward.pauseProducing()

    def resumeProducing(self) -> None:  # noqa: N802
        """The transport's buffer drained."""
        self._open.set()
        if self._forward is not None:
            self._forward.resumeProducing()

    def stopProducing(self) -> None:  # noqa: N802
        """The connection is going away: nothing waits any more."""
        self._open.set()
        if self._forward is not None:
            self._forward.stopProducing()

    async def wait(self, is_gone: Any) -> None:
        """Return once resumed, or once ``is_gone()`` (checked every :data:`GONE_POLL_SECONDS`)."""
        while not self._open.is_set() and not is_gone():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._open.wait(), GONE_POLL_SECONDS)


def _register(protocol: Any, message_type: str) -> SendGate | None:
    """Register a gate on ``protocol`` before its first streamed write; None where one cannot be.

    None where the connection is gone or another producer is registered on the response (the
    application's writes then go unchecked). On a WebSocket, the HTTP channel
    daphne upgraded stays registered on the transport: the gate takes its place and passes
    every call on to it, so Twisted's own flow control is unchanged.
    """
    if message_type == "http.response.body":
        channel = getattr(protocol, "channel", None)
        if channel is None or getattr(protocol, "producer", None) is not None:
            return None
        gate = SendGate(paused=bool(getattr(channel, "_waitingForTransport", False)))
        protocol.registerProducer(gate, True)  # twisted.web.http.Request -> HTTPChannel
    else:  # websocket.send: on the connection's transport, where the upgraded HTTP channel is registered
        transport = getattr(protocol, "transport", None)
        if transport is None:
            return None
        previous = getattr(transport, "producer", None)
        gate = SendGate(paused=bool(getattr(transport, "producerPaused", False)), forward=previous)
        if previous is not None:
            transport.unregisterProducer()
        transport.registerProducer(gate, True)
    setattr(protocol, GATE, gate)
    return gate


def _unregister(protocol: Any) -> None:
    """Drop ``protocol``'s gate before its last write (a keep-alive connection's next response registers its own)."""
    if protocol.__dict__.pop(GATE, None) is not None:
        with contextlib.suppress(Exception):  # a connection already torn down holds no producer
            protocol.unregisterProducer()


def _is_streamed_write(message: dict[str, Any]) -> bool:
    kind = message.get("type")
    return (kind == "http.response.body" and bool(message.get("more_body"))) or kind == "websocket.send"


def _is_last_write(message: dict[str, Any]) -> bool:
    kind = message.get("type")
    return (kind == "http.response.body" and not message.get("more_body")) or kind == "websocket.close"


def apply_send_backpressure() -> bool:
    """Make daphne's ASGI ``send`` wait while the client's buffer is full; return whether daphne is patched.

    Idempotent. Returns False, importing nothing, where this process does not run daphne
    (``daphne.server`` not imported) or daphne is absent.
    """
    server_module = sys.modules.get("daphne.server")
    if server_module is None or not hasattr(server_module, "Server"):
        return False
    server_class = server_module.Server
    if getattr(server_class, "helix_applies_backpressure", False):
        return True
    original = server_class.handle_reply

    @functools.wraps(original)
    async def handle_reply(self: Any, protocol: Any, message: dict[str, Any]) -> None:
        if not _is_streamed_write(message):
            if _is_last_write(message):
                _unregister(protocol)
            return await original(self, protocol, message)
        # Registered before the write, so that a write filling the buffer pauses the gate.
        gate = protocol.__dict__.get(GATE) or _register(protocol, message["type"])
        await original(self, protocol, message)
        if gate is not None and gate.is_paused:
            connections = self.connections
            await gate.wait(lambda: protocol not in connections or bool(connections[protocol].get("disconnected")))

    server_class.handle_reply = handle_reply
    server_class.helix_applies_backpressure = True
    return True
