"""A small OpenAI-compatible HTTP server on loopback, for tests that run the real ``openai`` SDK.

Serves ``POST /v1/chat/completions`` (streaming and not), ``POST /v1/responses``
(streaming, ``background``), ``GET /v1/responses/{id}`` (JSON, or SSE with
``stream=true&starting_after=N``) and ``POST /v1/responses/{id}/cancel``. Replies are
scripted (:class:`~helix_django.testing.openai_script.Reply`)::

    with FakeOpenAI() as server:
        server.replies.append(Reply(text="Hello there", tool_calls=[...]))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")

A host points its agent's OpenAI provider at ``server.base_url``. A reply can cut its stream
after N events (the connection closes without a terminal frame, as a dropped network would),
hold after the first event until a gate opens, and a background response completes
server-side on its own even when its stream was cut, so ``retrieve`` finds it complete.
A reply with ``interval_seconds`` is a paced operation generating on the server's timeline:
event ``i`` is due ``i * interval_seconds`` after the response was created, every stream of
it (the create stream, ``GET ...?stream=true&starting_after=N``) sends each event when it is
due, ``retrieve`` answers ``in_progress`` until the last event is due, and ``cancel`` stops
it (``cancelled``, no later event is sent; its usage counts the output deltas due before the cancel).
Every request is kept in ``server.requests`` as ``{"path", "body"}``. With no reply queued
the server answers :class:`Reply`'s default.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from helix_django.testing.openai_script import Reply, chat_chunks, response_events


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the server cuts on purpose end in errors; they are not failures."""
        return


class FakeOpenAI:
    """The server on a free loopback port; use as a context manager (serves from a daemon thread, stops on exit)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.responses: dict[str, dict[str, Any]] = {}
        self.is_stream_resume_broken = False
        """Answer 500 to ``GET /v1/responses/{id}?stream=true`` (forces a client to use retrieve)."""
        self.cancel_failures = 0
        """Answer 500 to this many ``POST /v1/responses/{id}/cancel`` (then cancel as usual)."""
        self.lock = threading.Lock()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        """The API's base URL, ``http://127.0.0.1:PORT/v1`` (the SDK's ``base_url``)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def status_of(self, record: dict[str, Any]) -> str:
        """Return a response's status: in_progress while its gate is closed (a paced one: until its
        last event is due), then completed; ``cancelled`` once cancelled before that."""
        if record["status"] == "in_progress" and (record["gate"] is None or record["gate"].is_set()):
            if time.monotonic() >= self.due_at(record, len(record["events"]) - 1):
                record["status"] = "completed"
        status: str = record["status"]
        return status

    def usage_so_far(self, record: dict[str, Any]) -> dict[str, int] | None:
        """Return a response's usage counting the output deltas due by now (a cancelled one reports these).

        None for a reply that reports no usage.
        """
        if record["final"]["usage"] is None:
            return None
        now = time.monotonic()
        due = [e for i, e in enumerate(record["events"]) if self.due_at(record, i) <= now]
        output = sum(
            1 for e in due if e["type"] in ("response.output_text.delta", "response.reasoning_summary_text.delta")
        )
        input_tokens = int(record["final"]["usage"]["input_tokens"])
        return {"input_tokens": input_tokens, "output_tokens": output, "total_tokens": input_tokens + output}

    def next_reply(self) -> Reply:
        """Pop the next scripted reply (the default :class:`Reply` when none is queued)."""
        with self.lock:
            return self.replies.pop(0) if self.replies else Reply()

    def create_response(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        """Record a Responses API response of ``reply``; return ``{"final", "events", "status", "gate"}``."""
        final, events = response_events(reply, body)
        # A background response runs on the server whatever happens to its stream: it is
        # complete as soon as its gate (if any) opens, unless it was cancelled before.
        record = {
            "final": final,
            "events": events,
            "status": "in_progress",
            "gate": reply.gate,
            "created": time.monotonic(),
            "interval": reply.interval_seconds,
        }
        with self.lock:
            self.responses[final["id"]] = record
        return record

    @staticmethod
    def due_at(record: dict[str, Any], index: int) -> float:
        """Return the monotonic time at which event ``index`` of a response is due (created + index * interval)."""
        return float(record["created"]) + index * float(record["interval"])

    def wait_due(self, record: dict[str, Any], index: int) -> bool:
        """Sleep until event ``index`` of ``record`` is due; False when the response was cancelled meanwhile."""
        while True:
            if record["interval"] and record["status"] == "cancelled":
                return False
            left = self.due_at(record, index) - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.05))


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(
            self,
            events: list[dict[str, Any]],
            reply: Reply | None,
            *,
            done: bool,
            named: bool,
            record: dict[str, Any] | None = None,
        ) -> None:
            """Send ``events`` as SSE; those of a paced ``record`` each when due (none after a cancel)."""
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for number, event in enumerate(events):
                if record is not None and not server.wait_due(record, event["sequence_number"]):
                    break
                if reply is not None and reply.cut_after is not None and number >= reply.cut_after:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # a drop: no terminal chunk
                    self.close_connection = True
                    return
                frame = (f"event: {event['type']}\n" if named else "") + f"data: {json.dumps(event)}\n\n"
                self._chunk(frame.encode())
                if number == 0 and reply is not None and reply.gate is not None:
                    reply.gate.wait(30)
            if done:
                self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            with server.lock:
                server.requests.append({"path": self.path, "body": body})
            return body

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            body = self._body()
            if path.endswith("/chat/completions"):
                reply = server.next_reply()
                if reply.status != 200:
                    return self._json(reply.status, {"error": {"message": "scripted failure", "type": "server_error"}})
                chunks = chat_chunks(reply, body.get("model", ""))
                if body.get("stream"):
                    return self._sse(chunks, reply, done=True, named=False)
                message = {"role": "assistant", "content": reply.text}
                return self._json(
                    200,
                    {
                        "id": "chatcmpl-x",
                        "object": "chat.completion",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    },
                )
            match = re.fullmatch(r"/v1/responses/([\w-]+)/cancel", path)
            if match:
                with server.lock:
                    fails, server.cancel_failures = server.cancel_failures > 0, max(0, server.cancel_failures - 1)
                if fails:
                    return self._json(500, {"error": {"message": "unavailable", "type": "server_error"}})
                record = server.responses.get(match.group(1))
                if record is None:
                    return self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                if server.status_of(record) != "completed":
                    record["status"] = "cancelled"
                    record["final"] = {**record["final"], "usage": server.usage_so_far(record)}
                return self._json(200, {**record["final"], "status": record["status"]})
            if path.endswith("/responses"):
                reply = server.next_reply()
                record = server.create_response(reply, body)
                if body.get("stream"):
                    return self._sse(record["events"], reply, done=False, named=True, record=record)
                return self._json(200, record["final"])
            self._json(404, {"error": {"message": "no route", "type": "invalid_request_error"}})

        def do_GET(self) -> None:
            with server.lock:
                server.requests.append({"path": self.path, "body": None})
            url = urlparse(self.path)
            match = re.fullmatch(r"/v1/responses/([\w-]+)", url.path)
            record = server.responses.get(match.group(1)) if match else None
            if record is None:
                return self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            query = parse_qs(url.query)
            if query.get("stream") == ["true"]:
                if server.is_stream_resume_broken:
                    return self._json(500, {"error": {"message": "unavailable", "type": "server_error"}})
                after = int(query.get("starting_after", ["-1"])[0])
                rest = [e for e in record["events"] if e["sequence_number"] > after]
                return self._sse(rest, None, done=False, named=True, record=record)
            status = server.status_of(record)
            self._json(
                200,
                {**record["final"], "status": status}
                if status == "completed"
                else {**record["final"], "status": status, "output": []},
            )

    return Handler
