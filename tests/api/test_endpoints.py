"""DRF endpoints over daphne: sessions, snapshot, runs, cancel, client-tool results, schema."""

from __future__ import annotations

import time

import pytest

from helix_django.models import ChatSession, Run, RunStatus
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def url(server, path):
    return server.url(f"{PREFIX}/{path}")


def suspended_session(server, client):
    """A session whose run waits for the browser's two pick_color results."""
    sid = new_session_id()
    sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("colors?")]))
    assert sent.status == 200 and sent.done
    for _ in range(100):
        run = Run.objects.filter(session_id=sid).first()
        if run and run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
            return sid, run
        time.sleep(0.02)
    raise AssertionError("the run did not suspend")


def test_sessions_list_create_retrieve_delete(tool_server, api):
    a, b = api("a"), api("b")
    created = a.post(url(tool_server, "sessions/"), json={"id": "chat_mine_1", "title": "Mine"})
    assert created.status_code == 201
    assert created.json()["id"] == "chat_mine_1" and created.json()["title"] == "Mine"
    assert a.post(url(tool_server, "sessions/"), json={"id": "chat_mine_1"}).status_code == 200  # idempotent
    minted = a.post(url(tool_server, "sessions/"), json={}).json()["id"]
    assert minted.startswith("chat_")
    assert {s["id"] for s in a.get(url(tool_server, "sessions/")).json()} == {"chat_mine_1", minted}
    assert b.get(url(tool_server, "sessions/")).json() == []
    assert a.get(url(tool_server, "sessions/chat_mine_1/")).json()["currentRunId"] is None
    # Another owner's id is "not found", on create too.
    taken = b.post(url(tool_server, "sessions/"), json={"id": "chat_mine_1"})
    assert taken.status_code == 404 and taken.json()["code"] == "state_session_not_found"
    bad = a.post(url(tool_server, "sessions/"), json={"id": "has spaces"})
    assert bad.status_code == 400 and bad.json()["fields"] == ["id"] and "has spaces" not in bad.text
    assert a.delete(url(tool_server, "sessions/chat_mine_1/")).status_code == 204
    assert not ChatSession.objects.filter(pk="chat_mine_1").exists()
    assert a.get(url(tool_server, "sessions/chat_mine_1/")).status_code == 404


def test_snapshot_and_runs(tool_server, api):
    a = api("a")
    sid, run = suspended_session(tool_server, a)
    snap = a.get(url(tool_server, f"sessions/{sid}/snapshot"))
    assert snap.status_code == 200
    body = snap.json()
    assert body["sessionId"] == sid and body["status"] == "paused" and body["runId"] == run.id
    assert body["resumeMessageId"] == run.response_message_id
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    runs = a.get(url(tool_server, f"sessions/{sid}/runs/")).json()
    assert [(r["id"], r["status"], r["kind"]) for r in runs] == [(run.id, "suspended_client_tool", "send")]
    missing = a.get(url(tool_server, "sessions/chat_nope/snapshot"))
    assert missing.status_code == 404
    assert missing.json() == {"error": "Session not found", "code": "state_session_not_found", "retryable": False}


def test_client_tool_results_partial_batch_then_continue_then_late_submit(tool_server, api):
    a = api("a")
    sid, run = suspended_session(tool_server, a)
    submit = url(tool_server, f"sessions/{sid}/runs/{run.id}/tool-results")
    partial = a.post(submit, json={"results": [{"toolCallId": "call_1", "output": {"color": "red"}}]})
    assert partial.status_code == 200 and partial.json() == {"runId": run.id, "continued": False}
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED_CLIENT_TOOL
    done = a.post(submit, json={"results": [{"toolCallId": "call_2", "output": {"color": "blue"}}]})
    assert done.status_code == 200
    body = done.json()
    assert body["continued"] is True and body["runId"] != run.id
    assert body["responseMessageId"] == run.response_message_id  # the continuation extends the same message
    resumed = read_sse(
        a, "GET", chat_url(tool_server, sid), headers={"X-Resume-From-Sequence": str(body["fromSequence"])}
    )
    assert resumed.status == 200 and resumed.done and "Thanks for the colors." in resumed.text
    late = a.post(submit, json={"results": [{"toolCallId": "call_2", "output": {"color": "green"}}]})
    assert late.status_code == 409 and late.json()["code"] == "state_run_superseded"


@pytest.mark.parametrize(
    "body",
    [
        {"results": []},
        {"results": [{"toolCallId": "call_1"}]},
        {"results": [{"toolCallId": "call_1", "output": 1, "errorText": "x"}]},
        {"results": "nope"},
        {},
    ],
)
def test_invalid_tool_results_are_400(tool_server, api, body):
    a = api("a")
    sid, run = suspended_session(tool_server, a)
    response = a.post(url(tool_server, f"sessions/{sid}/runs/{run.id}/tool-results"), json=body)
    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and response.json()["cause"] == "body"
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED_CLIENT_TOOL


def test_cancel_a_run(tool_server, api):
    a = api("a")
    sid, run = suspended_session(tool_server, a)
    response = a.post(url(tool_server, f"sessions/{sid}/runs/{run.id}/cancel"))
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert a.post(url(tool_server, f"sessions/{sid}/runs/run_nope/cancel")).json()["code"] == "state_run_not_found"
    snap = a.get(url(tool_server, f"sessions/{sid}/snapshot")).json()
    assert snap["status"] == "ended" and snap["runStatus"] == "cancelled" and snap["cancelledBy"] == "user"


def test_delete_is_refused_while_a_run_is_live(tool_server, api):
    a = api("a")
    sid, _run = suspended_session(tool_server, a)
    response = a.delete(url(tool_server, f"sessions/{sid}/"))
    assert response.status_code == 409 and response.json()["code"] == "state_already_running"
    assert ChatSession.objects.filter(pk=sid).exists()


def test_openapi_schema_covers_the_endpoints(tool_server, api):
    schema = api("a").get(url(tool_server, "schema/"), headers={"Accept": "application/json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in (
        "/helix/api/sessions/",
        "/helix/api/sessions/{session_id}/",
        "/helix/api/sessions/{session_id}/snapshot",
        "/helix/api/sessions/{session_id}/runs/",
        "/helix/api/sessions/{session_id}/runs/{run_id}/cancel",
        "/helix/api/sessions/{session_id}/runs/{run_id}/tool-results",
    ):
        assert path in paths, path
    assert "409" in paths["/helix/api/sessions/{session_id}/runs/{run_id}/tool-results"]["post"]["responses"]
