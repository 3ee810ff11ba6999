"""The host's middleware on helix's chat route: it reads the body helix read, and wraps every refusal.

- A middleware reading ``request.body`` gets the chat body helix read and bounded by
  ``MAX_REQUEST_BYTES``, not Django's ``RequestDataTooBig`` (an HTML 400) for a body over
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``; Django's guard still holds for the host's own views.
- A refusal made before the route's view (the 413 for a body over ``MAX_REQUEST_BYTES``)
  goes through the host's middleware too: it carries the host's CORS headers, so a browser
  app on another origin can read the typed error.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.host.conftest import HOST, ORIGIN, call, new_session_id, send_body

pytestmark = pytest.mark.django_db(transaction=True)

FROM_APP = (b"origin", ORIGIN.encode())
JSON = (b"content-type", b"application/json")
DIGEST = "tests.host.middleware.BodyDigestMiddleware"


@pytest.fixture
def body_reading_host(settings):
    """The host profile plus a middleware reading ``request.body``; Django's body limit at 1 KiB."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, DIGEST]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    return settings


async def test_a_middleware_reading_the_body_gets_a_chat_body_over_djangos_limit(body_reading_host, jwt_user):
    _user, auth = jwt_user
    sid = new_session_id()
    body = send_body(sid, "x" * 5000)
    status, headers, answer = await call("POST", f"/helix/api/sessions/{sid}/chat", [HOST, auth, JSON], body)
    assert status == 200, answer
    assert headers[b"x-body-sha256"] == hashlib.sha256(body).hexdigest().encode()
    assert answer.rstrip().endswith(b"data: [DONE]")


async def test_djangos_body_limit_still_guards_the_hosts_own_views(body_reading_host):
    from django.core.exceptions import RequestDataTooBig
    from django.test import RequestFactory

    request = RequestFactory().post("/admin/login/", data=b"x" * 5000, content_type="application/octet-stream")
    with pytest.raises(RequestDataTooBig):
        request.body  # noqa: B018 - the property is what raises


@pytest.mark.parametrize(
    ("method", "route"),
    [("POST", "sessions/{sid}/chat"), ("POST", "chat"), ("GET", "sessions/{sid}/stream")],
    ids=["chat", "ai-sdk-chat", "stream"],
)
async def test_a_body_over_max_request_bytes_is_refused_with_the_hosts_cors_headers(settings, jwt_user, method, route):
    settings.HELIX = {**settings.HELIX, "MAX_REQUEST_BYTES": 2048}
    _user, auth = jwt_user
    sid = new_session_id()
    body = send_body(sid, "x" * 4000)
    path = "/helix/api/" + route.format(sid=sid)
    status, headers, answer = await call(method, path, [HOST, FROM_APP, auth, JSON], body)
    assert status == 413
    assert json.loads(answer) == {
        "error": "Request body too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "request_body",
        "limitBytes": 2048,
        "sizeBytes": len(body),
    }
    assert headers[b"access-control-allow-origin"] == ORIGIN.encode()
    assert headers[b"x-frame-options"] == b"DENY"  # the host's clickjacking middleware ran too
