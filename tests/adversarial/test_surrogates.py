"""A lone UTF-16 surrogate escaped in a JSON body ("\\ud800") is refused: stored, it made the snapshot a 500."""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import ChatSession
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, chat_url, new_session_id

pytestmark = [pytest.mark.django_db(transaction=True)]

SURROGATE_BODY = b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi \\ud800"}]}]}'


def test_lone_surrogate_send_is_a_typed_400_and_writes_nothing(shared_server, users):
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        r = client.post(
            chat_url(shared_server, sid), content=SURROGATE_BODY, headers={"content-type": "application/json"}
        )
    assert r.status_code == 400
    assert_typed_refusal(r.status_code, r.json())
    assert r.json()["cause"] == "json"
    assert "ud800" not in r.text
    assert not ChatSession.objects.filter(pk=sid).exists()


@pytest.mark.parametrize(
    "where",
    ["message_id", "chat_id"],
)
def test_a_lone_surrogate_in_an_id_on_the_aisdk_route_is_a_typed_400(shared_server, users, where):
    """The stock route hashes the message id into a request key: a lone surrogate there was a 500."""
    sid = new_session_id()
    message_id = "\\ud800" if where == "message_id" else "u1"
    chat_id = f"{sid}\\ud800" if where == "chat_id" else sid
    body = (
        f'{{"id": "{chat_id}", "trigger": "submit-message", '
        f'"messages": [{{"id": "{message_id}", "role": "user", "parts": [{{"type": "text", "text": "hi"}}]}}]}}'
    ).encode()
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        r = client.post(shared_server.url(f"{PREFIX}/chat"), content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert_typed_refusal(r.status_code, r.json())
    assert "ud800" not in r.text
    assert not ChatSession.objects.filter(pk=sid).exists()
