"""A small OpenAI-compatible HTTP server on loopback, for tests that run the real ``openai`` SDK.

Serves ``POST /v1/chat/completions`` (streaming and not), ``POST /v1/responses``
(streaming, ``background``), ``GET /v1/responses/{id}`` (JSON, or SSE with
``stream=true&starting_after=N``) and ``POST /v1/responses/{id}/cancel``. Replies are
scripted::

    with FakeOpenAI() as server:
        server.replies.append(Reply(text="Hello there", tool_calls=[...]))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")

A reply can cut its stream after N events (the connection closes without a terminal
frame, as a dropped network would), hold after the first event until a gate opens, and
a background response completes server-side on its own even when its stream was cut,
so ``retrieve`` finds it complete. Every request body is kept in ``server.requests``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclasses.dataclass
class Reply:
    """One scripted model reply."""

    text: str = "Hello from the fake server."
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """``[{"id", "name", "arguments": dict}]``."""
    cut_after: int | None = None
    """Close the connection after this many SSE events (no terminal frame)."""
    gate: threading.Event | None = None
    """Hold the stream after its first event until this event is set."""
    status: int = 200
    """A non-200 status answers with an OpenAI-style error body instead."""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connections the server cuts on purpose end in errors; they are not failures."""
        return


def words(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*|\s+", text)


class FakeOpenAI:
    """The server; use as a context manager (starts a daemon thread, stops on exit)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.responses: dict[str, dict[str, Any]] = {}
        self.is_stream_resume_broken = False
        """Answer 500 to ``GET /v1/responses/{id}?stream=true`` (forces a client to use retrieve)."""
        self.lock = threading.Lock()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def status_of(self, record: dict[str, Any]) -> str:
        """Return a response's status: in_progress while its gate is closed, then completed."""
        if record["status"] == "in_progress" and (record["gate"] is None or record["gate"].is_set()):
            record["status"] = "completed"
        return record["status"]

    def next_reply(self) -> Reply:
        with self.lock:
            return self.replies.pop(0) if self.replies else Reply()

    # --- Chat Completions --------------------------------------------------------------------

    def chat_chunks(self, reply: Reply, model: str) -> list[dict[str, Any]]:
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"reasoning_content": w}) for w in words(reply.reasoning)]
        out += [chunk({"content": w}) for w in words(reply.text)]
        for index, call in enumerate(reply.tool_calls):
            arguments = json.dumps(call.get("arguments", {}))
            half = len(arguments) // 2
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments[:half]},
            }
            out.append(chunk({"tool_calls": [head]}))
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
        out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
        out.append(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": 7,
                    "completion_tokens": len(words(reply.text)),
                    "total_tokens": 7 + len(words(reply.text)),
                },
            }
        )
        return out

    # --- Responses ---------------------------------------------------------------------------

    def create_response(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        response_id = f"resp_{uuid.uuid4().hex}"
        output: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        shell = {
            "id": response_id,
            "object": "response",
            "created_at": time.time(),
            "model": body.get("model", ""),
            "output": [],
            "status": "in_progress",
            "background": bool(body.get("background")),
        }
        events.append({"type": "response.created", "response": dict(shell)})
        events.append({"type": "response.in_progress", "response": dict(shell)})
        if reply.reasoning:
            rid = f"rs_{uuid.uuid4().hex[:8]}"
            events += [
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": rid,
                    "output_index": 0,
                    "summary_index": 0,
                    "delta": w,
                }
                for w in words(reply.reasoning)
            ]
            output.append(
                {"id": rid, "type": "reasoning", "summary": [{"type": "summary_text", "text": reply.reasoning}]}
            )
        if reply.text:
            mid = f"msg_{uuid.uuid4().hex[:8]}"
            index = len(output)
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {"id": mid, "type": "message", "role": "assistant", "status": "in_progress", "content": []},
                }
            )
            events += [
                {
                    "type": "response.output_text.delta",
                    "item_id": mid,
                    "output_index": index,
                    "content_index": 0,
                    "delta": w,
                    "logprobs": [],
                }
                for w in words(reply.text)
            ]
            item = {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
            events.append(
                {
                    "type": "response.output_text.done",
                    "item_id": mid,
                    "output_index": index,
                    "content_index": 0,
                    "text": reply.text,
                    "logprobs": [],
                }
            )
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
            output.append(item)
        for call in reply.tool_calls:
            item = {
                "id": f"fc_{uuid.uuid4().hex[:8]}",
                "type": "function_call",
                "call_id": call["id"],
                "name": call["name"],
                "arguments": json.dumps(call.get("arguments", {})),
                "status": "completed",
            }
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": len(output),
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": len(output),
                    "arguments": item["arguments"],
                    "name": call["name"],
                }
            )
            events.append({"type": "response.output_item.done", "output_index": len(output), "item": item})
            output.append(item)
        final = {
            **shell,
            "status": "completed",
            "output": output,
            "usage": {
                "input_tokens": 7,
                "output_tokens": len(words(reply.text)),
                "total_tokens": 7 + len(words(reply.text)),
            },
        }
        events.append({"type": "response.completed", "response": final})
        for number, event in enumerate(events):
            event["sequence_number"] = number
        # A background response runs on the server whatever happens to its stream: it is
        # complete as soon as its gate (if any) opens, unless it was cancelled before.
        record = {"final": final, "events": events, "status": "in_progress", "gate": reply.gate}
        with self.lock:
            self.responses[response_id] = record
        return record


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

        def _sse(self, events: list[dict[str, Any]], reply: Reply | None, *, done: bool, named: bool) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for number, event in enumerate(events):
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
                chunks = server.chat_chunks(reply, body.get("model", ""))
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
                record = server.responses.get(match.group(1))
                if record is None:
                    return self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                if server.status_of(record) != "completed":
                    record["status"] = "cancelled"
                return self._json(200, {**record["final"], "status": record["status"]})
            if path.endswith("/responses"):
                reply = server.next_reply()
                record = server.create_response(reply, body)
                if body.get("stream"):
                    return self._sse(record["events"], reply, done=False, named=True)
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
                return self._sse(
                    [e for e in record["events"] if e["sequence_number"] > after], None, done=False, named=True
                )
            status = server.status_of(record)
            self._json(
                200,
                {**record["final"], "status": status}
                if status == "completed"
                else {**record["final"], "status": status, "output": []},
            )

    return Handler
