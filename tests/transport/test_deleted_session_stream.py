"""A deleted session's conversation never reaches whoever later takes its chat id.

Chat ids are minted by clients, so another user may create a session with the id of a
deleted one, and with it the same stream id. The deletion purges the stream's chunks
(``helix_django.streams.purge``): the raw stream route read from sequence 0 and the new
session's own send show nothing of the deleted conversation.
"""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import ChatSession
from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SECRET = "the private answer of the first owner."


def _stream_text(client: httpx.Client, server, sid: str) -> str:
    response = client.get(server.url(f"{PREFIX}/sessions/{sid}/stream"), params={"resumeFromSequence": "0"})
    if response.status_code == 404:  # the new session has no run yet: its stream is not found, as any new one's
        assert response.json()["code"] == "stream_not_found"
        return ""
    assert response.status_code == 200
    return response.text


@pytest.mark.parametrize("delete_with", ["api", "orm"])
def test_a_reused_chat_id_shows_nothing_of_the_deleted_session(daphne_server_factory, users, delete_with):
    server = daphne_server_factory(helix=agent_settings(TEXT=SECRET, RULES=[{"MATCH": "second", "TEXT": "Fresh."}]))
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as a, httpx.Client(headers=users["b"][1], timeout=20) as b:
        first = read_sse(a, "POST", chat_url(server, sid), json=send_body(sid, [user_message("first")]))
        assert first.text == SECRET
        wait_idle(a, server, sid)
        if delete_with == "api":
            assert a.delete(server.url(f"{PREFIX}/sessions/{sid}/")).status_code == 204
        else:  # the admin, a cascade from the owner, or code: the same receiver purges
            ChatSession.objects.filter(pk=sid).delete()

        # Another user takes the id: the stream read from 0 has none of the first conversation.
        assert b.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}).status_code == 201
        assert "private answer" not in _stream_text(b, server, sid)
        again = read_sse(b, "POST", chat_url(server, sid), json=send_body(sid, [user_message("second")]))
        assert again.text == "Fresh." and again.done
        wait_idle(b, server, sid)
        assert "private answer" not in _stream_text(b, server, sid)
        assert "Fresh." in _stream_text(b, server, sid)
