"""Wire errors in the request's language: the human ``error`` is translated, the ``code`` is not.

The ``errorDetail`` kept on a failed run stays English: it is stored once and read later by
whoever opens the run.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import translation

from helix_django.errors import AlreadyRunningError, SessionNotFoundError
from helix_django.models import ChatSession


def test_the_message_is_german_in_a_german_request_and_the_code_english():
    with translation.override("de"):
        body = SessionNotFoundError().to_body()
        detail = AlreadyRunningError().to_detail()
    assert body == {"error": "Sitzung nicht gefunden", "code": "state_session_not_found", "retryable": False}
    assert detail == {
        "code": "state_already_running",
        "category": "state",
        "retryable": True,
        "message": "A run is already active on this session",
    }
    with translation.override("en"):
        assert SessionNotFoundError().to_body()["error"] == "Session not found"


@pytest.mark.django_db
def test_a_german_browser_gets_a_german_refusal_over_http(settings):
    session, *others = settings.MIDDLEWARE
    settings.MIDDLEWARE = [session, "django.middleware.locale.LocaleMiddleware", *others]
    client = Client()
    client.force_login(get_user_model().objects.create_user("de-reader", password="pw"))
    response = client.get("/helix/api/sessions/s_missing/snapshot", HTTP_ACCEPT_LANGUAGE="de")
    assert response.status_code == 404
    assert response.json()["code"] == "state_session_not_found"
    assert response.json()["error"] == "Sitzung nicht gefunden"


@pytest.fixture
def german_site(settings):
    """tests.settings with LocaleMiddleware (after the session middleware, as Django documents it)."""
    session, *others = settings.MIDDLEWARE
    settings.MIDDLEWARE = [session, "django.middleware.locale.LocaleMiddleware", *others]
    return settings


@pytest.fixture
def token_header(transactional_db):
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user("de-sender", password="pw")
    return (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def chat_call(method, path, headers, body=b""):
    from tests.asgi import application

    communicator = HttpCommunicator(application, method, path, body=body, headers=headers)
    response = await communicator.get_response(timeout=20)
    return response["status"], json.loads(response["body"])


SID = "s_de_refusals"
MESSAGE = {"id": "m_de", "role": "user", "parts": [{"type": "text", "text": "hallo"}]}


CURSOR = [(b"x-resume-from-sequence", b"abc")]
#: Refusals of the chat routes, each ``(method, path under the prefix, headers, body, (status, cause, error))``.
REFUSALS = [
    pytest.param(
        "POST", f"sessions/{SID}/chat", [], b"{not json", (400, "json", "Fehlerhafter JSON-Körper"), id="json"
    ),
    pytest.param(
        "POST",
        f"sessions/{SID}/chat",
        [],
        b'{"messages": []}',
        (400, "messages", "Der Körper enthält keine Nachricht"),
        id="no-message",
    ),
    pytest.param(
        "GET", f"sessions/{SID}/chat", CURSOR, b"", (400, "cursor", "Ungültiger Fortsetzungs-Cursor"), id="chat-cursor"
    ),
    pytest.param(
        "GET",
        f"sessions/{SID}/stream",
        CURSOR,
        b"",
        (400, "cursor", "Ungültiger Fortsetzungs-Cursor"),
        id="stream-cursor",
    ),
    pytest.param("PUT", f"sessions/{SID}/chat", [], b"", (405, None, "Methode nicht erlaubt"), id="405"),
    # Refused before the route's view (the body unread or not the chat route's yet): through the host's middleware.
    pytest.param(
        "POST",
        f"sessions/{SID}/chat",
        [],
        json.dumps({"messages": [MESSAGE], "pad": "x" * 3000}).encode(),
        (413, "request_body", "Anfragekörper zu groß"),
        id="chat-413",
    ),
    pytest.param(
        "GET",
        f"sessions/{SID}/stream",
        [],
        b"x" * 3000,
        (413, "request_body", "Anfragekörper zu groß"),
        id="stream-413",
    ),
    pytest.param("POST", "chat", [], b"[1]", (400, "body", "Ungültiger Körper der Chat-Anfrage"), id="ai-sdk-body"),
    pytest.param("POST", "chat", [], b"x" * 3000, (413, "request_body", "Anfragekörper zu groß"), id="ai-sdk-413"),
    pytest.param("GET", "chat", [], b"", (405, None, "Methode nicht erlaubt"), id="ai-sdk-405"),
]


@pytest.mark.parametrize(("method", "path", "extra", "body", "expected"), REFUSALS)
@pytest.mark.django_db(transaction=True)
async def test_every_chat_route_refusal_is_german_in_a_german_request(
    german_site, token_header, method, path, extra, body, expected
):
    german_site.HELIX = {**german_site.HELIX, "MAX_REQUEST_BYTES": 2048}
    headers = [token_header, (b"accept-language", b"de"), (b"content-type", b"application/json"), *extra]
    status, answer = await chat_call(method, f"/helix/api/{path}", headers, body)
    assert (status, answer.get("cause"), answer["error"]) == expected


@pytest.mark.django_db(transaction=True)
def test_a_rest_body_over_max_request_bytes_is_refused_in_german(german_site, token_header):
    german_site.HELIX = {**german_site.HELIX, "MAX_REQUEST_BYTES": 2048}
    client = Client(HTTP_AUTHORIZATION=token_header[1].decode())
    body = json.dumps({"title": "x" * 3000})
    response = client.post("/helix/api/sessions/", body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="de")
    assert response.status_code == 413
    assert (response.json()["code"], response.json()["error"]) == (
        "validation_payload_too_large",
        "Anfragekörper zu groß",
    )


@pytest.mark.django_db(transaction=True)
async def test_the_websockets_refusals_are_in_the_handshakes_language(german_site, token_header):
    from tests.asgi import application

    german = [token_header, (b"accept-language", b"de")]
    foreign = WebsocketCommunicator(application, "/ws/helix/api/sessions/s_de_nobody/", headers=german)
    await foreign.connect()
    refused = await foreign.receive_json_from(timeout=5)
    assert (refused["code"], refused["error"]) == ("state_session_not_found", "Sitzung nicht gefunden")
    await foreign.disconnect()

    await ChatSession.objects.acreate(id="s_de_socket", owner=await get_user_model().objects.aget(username="de-sender"))
    socket = WebsocketCommunicator(application, "/ws/helix/api/sessions/s_de_socket/", headers=german)
    connected, _code = await socket.connect()
    assert connected
    await socket.send_to(text_data="{not json")
    frame = await socket.receive_json_from(timeout=5)
    assert (frame["cause"], frame["error"]) == ("json", "Fehlerhafter JSON-Körper")
    await socket.disconnect()


def test_the_409_of_a_failed_runs_resume_is_german_throughout():
    """Its ``message`` stayed English in a German response (a new-user check of the sixteenth session)."""
    from helix_django.transport.planner import StreamFailedResponse

    failed = StreamFailedResponse(session_id="s1", stream_id="s1", error={"code": "run_interrupted", "retryable": True})
    with translation.override("de"):
        body = failed.to_body()
    assert (body["code"], body["message"]) == ("run_interrupted", "Der Stream ist fehlgeschlagen")
    with translation.override("en"):
        assert failed.to_body()["message"] == "The stream failed"
