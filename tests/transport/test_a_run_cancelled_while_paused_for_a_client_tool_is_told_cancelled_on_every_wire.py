"""A run stopped while it waits for a client tool's result is told ``cancelled`` on every wire.

Seen: after Stop (the owner's cancel route, or staff in the admin) on a run paused for a
client tool, a chat-route resume with a cursor inside the run (``X-Resume-From-Sequence``,
also on the AI SDK's ``GET chat/<id>/stream``) replayed the tool's input and ended with a
bare ``[DONE]``, as if the run still waited for the browser (a client's ``onToolCall``
then runs the tool, whose result is refused). The raw stream route and the WebSocket said
``end {status: "cancelled"}``, a replay-prefix resume ``abort``. Expected (docs/transport.md,
"Endings"): ``{"type": "abort"}`` then ``[DONE]`` on the chat routes.
"""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Run, RunStatus
from tests.transport.conftest import (
    PREFIX,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
    ws_terminal,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(daphne_server_factory):
    return daphne_server_factory(
        helix=agent_settings(tools=["pick_color"], TOOL_CALLS=[{"name": "pick_color", "arguments": {"prompt": "p"}}])
    )


def paused_run(client, server) -> tuple[str, Run]:
    sid = new_session_id()
    live = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("pick")]))
    assert live.done and any(c["type"] == "tool-input-available" for c in live.chunks)
    run = Run.objects.get(session_id=sid)
    assert run.status == RunStatus.SUSPENDED_CLIENT_TOOL
    return sid, run


def test_a_run_cancelled_while_paused_for_a_client_tool_ends_with_abort_on_every_wire(server, users):
    headers = users["a"][1]
    with httpx.Client(headers=headers, timeout=15) as client:
        sid, run = paused_run(client, server)
        cancelled = client.post(server.url(f"{PREFIX}/sessions/{sid}/runs/{run.id}/cancel"))
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        for _ in range(100):
            if Run.objects.get(pk=run.id).status == RunStatus.CANCELLED:
                break
            time.sleep(0.02)
        cursor = str(run.start_sequence + 1)  # a client that held the run's first chunk
        told = {}
        for wire, url in (("chat", chat_url(server, sid)), ("aisdk", server.url(f"{PREFIX}/chat/{sid}/stream"))):
            result = read_sse(client, "GET", url, headers={"X-Resume-From-Sequence": cursor})
            told[wire] = [e.data for e in result.events[-2:]]
        raw = read_sse(client, "GET", server.url(f"{PREFIX}/sessions/{sid}/stream"), headers={"Last-Event-ID": cursor})
        told["raw"] = raw.events[-1].chunk
        told["ws"] = ws_terminal(server, sid, headers, int(cursor))
    assert told == {
        "chat": ['{"type":"abort"}', "[DONE]"],
        "aisdk": ['{"type":"abort"}', "[DONE]"],
        "raw": {"type": "end", "status": "cancelled"},
        "ws": {"type": "end", "status": "cancelled"},
    }
