"""How a run's ending reads on each wire: the chat route (AI SDK SSE), the raw stream route, the WebSocket.

The kill campaign (tests/recovery/kill_campaign.py) reads every run it broke through these
readers and judges the ending with the ``is_*`` predicates (issue 17, "Truthful endings on
every wire"):

- chat route: an interrupted or failed run ends with a UI ``error`` chunk whose
  ``errorText`` is the typed JSON body (``{"error", "code", ...}``), or the route answers a
  typed JSON refusal; a cancelled run ends ``abort`` then ``[DONE]``;
- raw stream route and WebSocket: an interrupted or failed run ends with a ``fail`` frame
  whose ``errorDetail.code`` is the run's error code (never the reader's own ``stream_drop``);
  a cancelled one with ``end``/``cancelled``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx
from httpx_sse import EventSource
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

PREFIX = "/helix/api"
DONE = "[DONE]"
TRANSPORT_LOST = "<transport lost>"
"""The last item of a read that the server's death cut (what a client attached before a kill sees)."""


def read_chat(
    server: Any,
    session_id: str,
    headers: dict[str, str],
    *,
    cursor: int | None = None,
    body: dict | None = None,
    on_item: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Read the chat route to its end: POST ``body`` (a send), else GET from ``cursor`` (a resume).

    Returns the items in order: a dict per JSON event (``_sequence`` added from ``id:``),
    ``DONE`` for ``[DONE]``, ``TRANSPORT_LOST`` when the connection died under the read;
    a non-SSE answer is one item ``{"_status": int, **json_body}``. ``on_item`` is called with
    each item as it arrives (to time them).
    """
    url = server.url(f"{PREFIX}/sessions/{session_id}/chat")
    if cursor is not None:
        headers = {**headers, "X-Resume-From-Sequence": str(cursor)}
    items: list[Any] = []

    def add(item: Any) -> None:
        items.append(item)
        if on_item is not None:
            on_item(item)

    method, kwargs = ("POST", {"json": body}) if body is not None else ("GET", {})
    try:
        with httpx.Client(timeout=30) as client, client.stream(method, url, headers=headers, **kwargs) as response:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                response.read()
                add({"_status": response.status_code, **_json_or_empty(response.text)})
                return items
            for sse in EventSource(response).iter_sse():
                if sse.data:
                    add(DONE if sse.data == DONE else {**json.loads(sse.data), "_sequence": _int(sse.id)})
    except httpx.TransportError:
        add(TRANSPORT_LOST)
    return items


def _int(value: str | None) -> int | None:
    return int(value) if value else None


def read_raw_stream(server: Any, session_id: str, headers: dict[str, str], cursor: int) -> list[dict[str, Any]]:
    """Read the raw stream route from ``cursor``: its frames (``{"type": "chunk"|"end"|"fail", ...}``).

    A non-SSE answer is one item ``{"_status": int, **json_body}``.
    """
    url = server.url(f"{PREFIX}/sessions/{session_id}/stream")
    with (
        httpx.Client(timeout=30) as client,
        client.stream("GET", url, headers={**headers, "Last-Event-ID": str(cursor)}) as response,
    ):
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.read()
            return [{"_status": response.status_code, **_json_or_empty(response.text)}]
        return [json.loads(sse.data) for sse in EventSource(response).iter_sse() if sse.data]


def read_websocket_doubled(server: Any, session_id: str, cookie: dict[str, str], cursor: int) -> list[dict[str, Any]]:
    """Send ``resume`` from ``cursor`` twice back to back on one socket; return every frame it carried.

    Reads until a terminal frame (``end``/``fail``/``error``) is followed by 0.3 s of quiet
    (a replaced reader may end before the one that replaced it); the last terminal is the ending.
    """
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/"
    frames: list[dict[str, Any]] = []
    with connect(url, additional_headers=cookie, open_timeout=10) as ws:
        for _ in range(2):
            ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))
        while True:
            ended = any(f["type"] in ("end", "fail", "error") for f in frames)
            try:
                frames.append(json.loads(ws.recv(timeout=0.3 if ended else 15)))
            except TimeoutError:
                if ended:
                    return frames
                raise


def watch_websocket_live(server: Any, session_id: str, cookie: dict[str, str], frames: list[dict[str, Any]]) -> None:
    """Follow a live run on one socket, resuming from 0 again after 3 chunks; append every frame to ``frames``.

    Returns at the run's terminal frame or when the connection dies (the server was killed).
    The second resume lands while chunks arrive: the socket must not carry a sequence twice.
    """
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/"
    with contextlib.suppress(OSError, TimeoutError, WebSocketException), connect(url, additional_headers=cookie) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        resumed = False
        while True:
            frames.append(json.loads(ws.recv(timeout=30)))
            if not resumed and sum(f["type"] == "chunk" for f in frames) >= 3:
                ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
                resumed = True
            if frames[-1]["type"] in ("end", "fail", "error"):
                return


def duplicated_sequences(frames: list[dict[str, Any]]) -> int:
    """Return how many chunk frames carried a sequence this socket had already delivered."""
    sequences = [f["sequence"] for f in frames if f["type"] == "chunk"]
    return len(sequences) - len(set(sequences))


def _json_or_empty(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _typed(body: Any, code: str) -> bool:
    return isinstance(body, dict) and body.get("code") == code


def chat_ends_with_typed_error(items: list[Any], code: str) -> bool:
    """Whether a chat-route read of a run that ended ``code`` (e.g. ``run_interrupted``) says so, typed.

    Either the last event before ``[DONE]`` is ``{"type": "error", "errorText": <typed JSON
    with this code>}``, or the route refused with that typed JSON body (e.g. 409).
    """
    if len(items) == 1 and isinstance(items[0], dict) and "_status" in items[0]:
        return _typed(items[0], code)
    events = [i for i in items if isinstance(i, dict)]
    if not events or events[-1].get("type") != "error":
        return False
    return _typed(_json_or_empty(events[-1].get("errorText", "")), code)


def chat_ends_with_abort(items: list[Any]) -> bool:
    """Whether a chat-route read of a cancelled run ends ``abort`` then ``[DONE]``."""
    return len(items) >= 2 and items[-1] == DONE and isinstance(items[-2], dict) and items[-2].get("type") == "abort"


def frames_end_truthfully(frames: list[dict[str, Any]], status: str, code: str) -> bool:
    """Whether raw-stream/WebSocket frames end as the run did: ``fail`` with ``code``, or ``end``/``status``.

    A typed refusal (``{"_status": 409, "code": code}`` or an ``error`` frame with it) also counts.
    """
    terminals = [f for f in frames if f.get("type") in ("end", "fail", "error") or "_status" in f]
    if not terminals:
        return False
    last = terminals[-1]
    if last.get("type") == "error" or "_status" in last:
        return _typed(last, code)
    if status == "cancelled":
        return last == {"type": "end", "status": "cancelled"}
    return last.get("type") == "fail" and _typed(last.get("errorDetail"), code)
