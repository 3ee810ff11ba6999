"""Size limits: no stored chunk, SSE frame or WebSocket message over MAX_CHUNK_BYTES; tool results bounded (issue 20).

Over real HTTP (daphne), with small limits so the bodies stay light: a server tool
returning 5 MB (before: one 5 MB frame; 40 MB went out as one 41.9 MB frame) fails its
step with a typed error and is not run again; a 90 KB result goes out whole and the
model's 90 KB one-word answer echoing it is split into deltas under the limit, which
the client concatenates into the committed text; a client tool result over the limit is
a typed 413. A WebSocket client that refuses messages over the limit reads it all.
"""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect

from helix_django.models import ChatSession, Message, Run, ToolExecution
from tests.adversarial.conftest import assert_typed_refusal, wait_idle
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, send_body, user_message
from tests.transport.test_stream_and_ws_live import cookie_of, ws_frames

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LIMITS = {"MAX_CHUNK_BYTES": 200_000, "MAX_TOOL_RESULT_BYTES": 100_000}
CALLS = [
    {"name": "blob", "arguments": {"size": 90_000}, "id": "call_fits"},
    {"name": "blob", "arguments": {"size": 5_000_000}, "id": "call_huge"},
]
#: SSE framing around a chunk's JSON (``id: N``, ``data: ``, newlines).
FRAME_OVERHEAD = 64


def sse_frames(raw: bytes) -> list[bytes]:
    return [block for block in raw.split(b"\n\n") if block and not block.startswith(b":")]


def test_frames_stay_under_the_chunk_limit_and_tool_results_are_bounded(daphne_server_factory, users):
    server = daphne_server_factory(helix={**agent_settings(tools=["blob"], TOOL_CALLS=CALLS), **LIMITS})
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=60) as client:
        with client.stream("POST", chat_url(server, sid), json=send_body(sid, [user_message("go")])) as response:
            raw = response.read()
        wait_idle(client, server, sid)
    frames = sse_frames(raw)
    assert frames[-1].endswith(b"data: [DONE]")
    assert max(map(len, frames)) <= LIMITS["MAX_CHUNK_BYTES"] + FRAME_OVERHEAD
    chunks = [json.loads(f.split(b"data: ", 1)[1]) for f in frames[:-1]]
    by_call = {c["toolCallId"]: c for c in chunks if c["type"].startswith("tool-output")}
    assert by_call["call_fits"]["type"] == "tool-output-available" and by_call["call_fits"]["output"] == "x" * 90_000
    assert by_call["call_huge"] == {
        "type": "tool-output-error",
        "toolCallId": "call_huge",
        "errorText": "The tool result is larger than the limit (MAX_TOOL_RESULT_BYTES); it was not kept",
    } | {k: v for k, v in by_call["call_huge"].items() if k.startswith("_")}
    record = ToolExecution.objects.get(tool_call_id="call_huge")
    assert (record.status, record.result) == (
        "succeeded",
        {"error": "tool_result_too_large", "sizeBytes": 5_000_002, "limitBytes": 100_000},
    )
    deltas = [c for c in chunks if c["type"] == "text-delta"]
    text = "".join(c["delta"] for c in deltas)
    assert "x" * 90_000 in text and len(deltas) > 5  # the echoed answer, split
    answer = Message.objects.get(session_id=sid, role="assistant")
    assert "".join(p.get("text", "") for p in answer.parts if p["type"] == "text") == text
    assert Run.objects.get(session_id=sid).status == "completed"

    # A WebSocket client refusing messages over the limit (websockets closes with 1009) reads the whole stream.
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    with connect(url, additional_headers=cookie_of(users["a"][0]), max_size=LIMITS["MAX_CHUNK_BYTES"] + 100) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        replay = ws_frames(ws)
    assert replay[-1] == {"type": "end", "status": "completed"}
    assert "".join(f["chunk"].get("delta", "") for f in replay if f["type"] == "chunk") == "".join(
        c.get("delta", "") for c in chunks
    )


def test_a_client_tool_result_over_the_limit_is_a_typed_413(daphne_server_factory, users):
    call = {"name": "pick_color", "arguments": {"prompt": "p"}, "id": "call_pick"}
    server = daphne_server_factory(helix={**agent_settings(tools=["pick_color"], TOOL_CALLS=[call]), **LIMITS})
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=30) as client:
        with client.stream("POST", chat_url(server, sid), json=send_body(sid, [user_message("pick")])) as response:
            response.read()
        run = Run.objects.get(session_id=sid)
        assert run.status == "suspended_client_tool"
        url = server.url(f"{PREFIX}/sessions/{sid}/runs/{run.id}/tool-results")
        r = client.post(url, json={"results": [{"toolCallId": "call_pick", "output": "x" * 100_000}]})
        assert_typed_refusal(r.status_code, r.json())
        assert r.status_code == 413
        assert r.json() | {"error": "-"} == {
            "error": "-",
            "code": "validation_payload_too_large",
            "retryable": False,
            "cause": "tool_result",
            "limitBytes": 100_000,
            "sizeBytes": 100_002,
        }
        run.refresh_from_db()
        assert run.status == "suspended_client_tool"
        ok = client.post(url, json={"results": [{"toolCallId": "call_pick", "output": "x" * 99_000}]})
        assert ok.status_code == 200 and ok.json()["continued"] is True
        wait_idle(client, server, sid)
    assert ChatSession.objects.filter(pk=sid).exists()
