"""A helix 401 carries the ``WWW-Authenticate`` challenge of the host's first authentication class.

Found by a new user (seventeenth session): helix's typed 401s, REST and chat route alike, had
no ``WWW-Authenticate`` although the host authenticates with JWT; RFC 9110 (11.6.1) asks
a 401 to carry it, and DRF's own views send it (``APIView.get_authenticate_header``).
"""

from __future__ import annotations

import json

import pytest

from tests.host.conftest import HOST, call, new_session_id, send_body

pytestmark = pytest.mark.django_db(transaction=True)

JSON = (b"content-type", b"application/json")
BAD_JWT = (b"authorization", b"Bearer not-a-token")


@pytest.mark.parametrize(
    ("method", "route", "headers"),
    [
        ("GET", "sessions/", [HOST]),
        ("GET", "sessions/{sid}/chat", [HOST]),
        ("POST", "sessions/{sid}/chat", [HOST, JSON]),
        ("POST", "chat", [HOST, JSON]),
        ("GET", "sessions/{sid}/stream", [HOST]),
        ("GET", "sessions/{sid}/chat", [HOST, BAD_JWT]),
    ],
    ids=["rest", "resume", "send", "ai-sdk-send", "raw-stream", "bad-token"],
)
async def test_the_401_names_the_jwt_scheme(method, route, headers):
    sid = new_session_id()
    body = send_body(sid) if method == "POST" else b""
    status, answer_headers, answer = await call(method, "/helix/api/" + route.format(sid=sid), headers, body)
    assert status == 401, answer
    assert json.loads(answer)["code"] in ("auth_not_authenticated", "auth_failed")
    assert {k.lower(): v for k, v in answer_headers.items()}[b"www-authenticate"] == b'Bearer realm="api"'


async def test_a_session_only_host_answers_401_without_a_challenge(settings):
    settings.HELIX = {
        **settings.HELIX,
        "AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    }
    status, headers, _answer = await call("GET", f"/helix/api/sessions/{new_session_id()}/chat", [HOST])
    assert status == 401 and b"www-authenticate" not in {k.lower() for k in headers}
