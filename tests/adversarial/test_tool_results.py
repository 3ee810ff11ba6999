"""Tool results of every shape on a run paused for a client tool: typed refusals, and nothing that poisons the snapshot."""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Run
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]

TOOL_CALL = {"name": "pick_color", "arguments": {"prompt": "p"}, "id": "call_pick"}


@pytest.fixture
def paused(daphne_server_factory, users):
    server = daphne_server_factory(helix=agent_settings(tools=["pick_color"], TOOL_CALLS=[TOOL_CALL], TEXT="Picked."))
    client = httpx.Client(headers=users["a"][1], timeout=20)

    def make():
        sid = new_session_id()
        result = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("pick")]))
        assert result.status == 200
        run = Run.objects.get(session_id=sid)
        assert run.status == "suspended_client_tool", run.status
        return sid, run.id

    yield server, client, make
    client.close()


def test_bad_tool_result_bodies_are_typed_and_the_run_still_takes_a_good_one(paused):
    server, client, make = paused
    sid, run_id = make()
    url = server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results")
    bad = [
        b'{"results": [{"toolCallId": "call_pick", "output": "\\ud800"}]}',
        b'{"results": [{"toolCallId": "call_pick", "output": {"k\\udfff": 1}}]}',
        b'{"results": [{"toolCallId": "call_pick"}]}',
        b'{"results": [{"toolCallId": "call_pick", "output": 1, "approved": true}]}',
        b'{"results": []}',
        b'{"results": [{"toolCallId": "call_unknown", "output": 1}]}',
        b'{"results": [{"toolCallId": "call_pick", "output": ' + b"[" * 3000 + b"]" * 3000 + b"}]}",
    ]
    for body in bad:
        r = client.post(url, content=body, headers={"content-type": "application/json"})
        assert_typed_refusal(r.status_code, r.json(), statuses=(400, 404, 409))
        snap = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot"))
        assert snap.status_code == 200, (body[:60], snap.status_code)
        assert snap.json()["status"] == "paused", body[:60]
    ok = client.post(url, json={"results": [{"toolCallId": "call_pick", "output": {"color": "red"}}]})
    assert ok.status_code == 200 and ok.json()["continued"] is True
    for _ in range(300):
        snap = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
        if snap["status"] == "ended":
            break
        time.sleep(0.02)
    assert snap["status"] == "ended"


def test_tool_results_for_a_foreign_or_unknown_run_are_404(paused, users):
    server, client, make = paused
    sid, run_id = make()
    for path in (
        f"{PREFIX}/sessions/{sid}/runs/run_nope/tool-results",
        f"{PREFIX}/sessions/{sid}/runs/%E2%98%83/tool-results",
        f"{PREFIX}/sessions/{sid}/runs/{'r' * 5000}/cancel",
    ):
        r = client.post(server.url(path), json={"results": [{"toolCallId": "call_pick", "output": 1}]})
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
    with httpx.Client(headers=users["b"][1], timeout=10) as other:
        r = other.post(
            server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results"),
            json={"results": [{"toolCallId": "call_pick", "output": 1}]},
        )
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
        r = other.post(server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/cancel"))
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
    assert Run.objects.get(pk=run_id).status == "suspended_client_tool"
