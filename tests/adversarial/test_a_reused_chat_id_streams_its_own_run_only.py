"""Adversarial: a chat id reused after its session was deleted (the send's head is no longer read).

A deleted session leaves its stream (its sequences are never reused). The first send
to a new session with that id must stream its own run only: not the deleted turn's
chunks, and never its stored ``error`` chunk as this response's terminal.
"""

from __future__ import annotations

import httpx

from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message


def test_a_send_to_a_reused_chat_id_streams_its_own_run_only(daphne_server_factory, users):
    server = daphne_server_factory(
        helix=agent_settings(TEXT="fresh answer.", RULES=[{"MATCH": "boom", "FAIL_AFTER_CHUNKS": 1}])
    )
    _user, headers = users["a"]
    sid = new_session_id()
    with httpx.Client(headers=headers, timeout=20) as client:
        failed = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("boom")]))
        assert failed.status == 200 and any(c.get("type") == "error" for c in failed.chunks)
        assert wait_idle(client, server, sid)["status"] == "failed"
        assert client.delete(server.url(f"{PREFIX}/sessions/{sid}/")).status_code == 204

        again = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hello")]))
        assert again.status == 200
        assert [c for c in again.chunks if c.get("type") == "error"] == []
        assert again.text == "fresh answer." and again.done
        assert min(int(e.id) for e in again.events if e.id) > max(int(e.id) for e in failed.events if e.id)
        snapshot = wait_idle(client, server, sid)
        assert snapshot["status"] == "ended"
        assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant"]
