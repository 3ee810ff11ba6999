"""The JS client's building blocks against their Python twins and a well-kept SSE parser.

- accumulator.js applies chunks exactly like helix_django.protocol.MessageAccumulator;
- sse.js splits an event stream exactly like httpx-sse, whatever the byte boundaries, and
  keeps each frame's own ``id:``.
"""

from __future__ import annotations

import httpx
from httpx_sse import EventSource

from helix_django.protocol import MessageAccumulator
from tests.browser.jsrun import run_module

CHUNK_SCRIPTS = [
    [
        {"type": "start", "messageId": "msg_1", "messageMetadata": {"a": 1}},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "r"},
        {"type": "reasoning-delta", "id": "r", "delta": "Think"},
        {"type": "reasoning-end", "id": "r"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "Hello, "},
        {"type": "text-delta", "id": "t", "delta": "wörld ✓"},
        {"type": "text-delta", "id": "missing", "delta": "ignored"},
        {"type": "text-end", "id": "t"},
        {"type": "data-progress", "id": "p", "data": {"n": 1}},
        {"type": "data-progress", "id": "p", "data": {"n": 2}},
        {"type": "data-note", "data": "kept"},
        {"type": "data-ephemeral", "data": 1, "transient": True},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "search"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {"q": "x"}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"hits": 3}},
        {"type": "tool-input-available", "toolCallId": "c2", "toolName": "dyn", "input": {}, "dynamic": True},
        {"type": "tool-approval-request", "toolCallId": "c2", "approvalId": "ap"},
        {"type": "tool-output-denied", "toolCallId": "c2"},
        {"type": "tool-input-error", "toolCallId": "c3", "toolName": "bad", "input": "{", "errorText": "parse"},
        {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "_run": "run_x"},
        {"type": "file", "url": "data:,x", "mediaType": "text/plain"},
        {"type": "message-metadata", "messageMetadata": {"b": 2}},
        {"type": "helix-run-end", "status": "completed"},
        {"type": "finish", "finishReason": "stop", "messageMetadata": {"c": 3}},
    ],
    [
        {"type": "start", "messageId": "msg_2"},
        {"type": "start-step"},
        {"type": "text-start", "id": "a"},
        {"type": "text-delta", "id": "a", "delta": "partial"},
    ],
]


def test_accumulator_matches_python_message_accumulator():
    expected = []
    for chunks in CHUNK_SCRIPTS:
        acc = MessageAccumulator("seed")
        for chunk in chunks:
            acc.apply(chunk)
        expected.append({"open": acc.snapshot(close=False), "closed": acc.snapshot(close=True)})
    actual = run_module(
        """
        const { MessageAccumulator } = await import(STATIC + "/accumulator.js");
        const out = INPUT.map((chunks) => {
          const acc = new MessageAccumulator("seed");
          for (const chunk of chunks) acc.apply(chunk);
          return { open: acc.snapshot(), closed: acc.snapshot({ close: true }) };
        });
        console.log(JSON.stringify(out));
        """,
        CHUNK_SCRIPTS,
    )
    assert actual == expected


STREAM = (
    "\ufeff: stream-open\r\n\r\n"
    'id: 7\r\ndata: {"type":"text-delta","id":"t","delta":"a"}\r\n\r\n'
    "event: error\nid: 8\ndata: line one\ndata: line two\n\n"
    ': keep-alive\ndata: {"type":"replayed"}\n\n'
    "id: 9\rdata: cr only\r\r"
    "id\nevent\ndata\n\n"
    "data: [DONE]\n\n"
    "id: 10\ndata: cut without its blank line"
)


def _httpx_sse_events(text: str) -> list[dict]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())
    events = []
    for sse in EventSource(response).iter_sse():
        events.append({"event": sse.event, "data": sse.data})
    return events


def test_sse_parser_matches_httpx_sse_at_every_split():
    raw = STREAM.encode("utf-8")
    splits = sorted({1, 2, 3, 5, 8, 13, 21, 34, len(raw) // 2, len(raw) - 1})
    result = run_module(
        """
        const { readEventStream } = await import(STATIC + "/sse.js");
        const bytes = new TextEncoder().encode(INPUT.text);
        const runs = [];
        for (const size of INPUT.splits) {
          const body = new ReadableStream({
            start(controller) {
              for (let i = 0; i < bytes.length; i += size) controller.enqueue(bytes.slice(i, i + size));
              controller.close();
            },
          });
          const frames = [];
          for await (const frame of readEventStream(body)) frames.push(frame);
          runs.push(frames);
        }
        console.log(JSON.stringify(runs));
        """,
        {"text": STREAM, "splits": splits},
    )
    reference = _httpx_sse_events(STREAM.removeprefix("\ufeff"))
    # httpx-sse drops the trailing unterminated frame too, and reports "message" for no event.
    for frames in result:
        assert [{"event": f["event"], "data": f["data"]} for f in frames] == reference
        # Each frame keeps only its own id (httpx-sse carries the last id forward instead).
        assert [f["id"] for f in frames] == ["7", "8", None, "9", "", None]


def test_sse_parser_dispatches_no_frame_for_heartbeats():
    # WHATWG: a blank line with an empty data buffer dispatches nothing (a bare keep-alive).
    frames = run_module(
        """
        const { readEventStream } = await import(STATIC + "/sse.js");
        const body = new Response(INPUT).body;
        const frames = [];
        for await (const frame of readEventStream(body)) frames.push(frame);
        console.log(JSON.stringify(frames));
        """,
        ': stream-open\n\n: keep-alive\n\nid: 3\ndata: {"type":"finish"}\n\n: keep-alive\n\n',
    )
    assert frames == [{"id": "3", "event": "message", "data": '{"type":"finish"}'}]
