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

import pytest

from tests.host.conftest import HOST, call, new_session_id, send_body

pytestmark = pytest.mark.django_db(transaction=True)

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
