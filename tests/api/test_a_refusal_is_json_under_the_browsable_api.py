"""A refusal of helix's REST views is typed JSON even where the browsable API would render the response.

Under DRF's default renderers (the suite's settings: JSON and the browsable API), a browser
(``Accept: text/html``) or ``?format=api`` got every refusal (401, 404, 405, a 406 page)
as the browsable API's HTML page. A success may still be rendered by the host's renderer
(the browsable API is served where the host renders it); a refusal is always the typed
JSON body. In process, through the suite's ASGI application.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from helix_django import store

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(transactional_db):
    user = get_user_model().objects.create_user(username="html-refusals", password="pw-not-secret")
    session, _created = store.get_or_create_session("chat_html_refusals", owner_id=user.pk)
    return session.pk, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def call(method: str, path: str, headers: list[tuple[bytes, bytes]]):
    from tests.asgi import application

    response = await HttpCommunicator(application, method, path, headers=headers).get_response(timeout=10)
    content_type = {name.lower(): value for name, value in response["headers"]}.get(b"content-type", b"")
    return response["status"], content_type, response["body"]


def assert_typed(status: int, content_type: bytes, body: bytes, expected_status: int, request: str) -> None:
    assert (status, content_type) == (expected_status, b"application/json"), (request, status, body[:200])
    refusal = json.loads(body)
    assert {"error", "code", "retryable"} <= set(refusal), (request, refusal)


async def test_a_refusal_is_typed_json_whatever_the_browsable_api_would_render(owner):
    sid, auth = owner
    html = (b"accept", b"text/html")
    cases = [
        # (method, path, headers, status)
        ("GET", "/helix/api/sessions/", [html], 401),
        ("GET", "/helix/api/sessions/?format=api", [], 401),
        ("GET", "/helix/api/sessions/chat_someone_elses/", [html, auth], 404),
        ("GET", "/helix/api/sessions/chat_someone_elses/snapshot?format=api", [auth], 404),
        ("PUT", "/helix/api/sessions/", [html, auth], 405),
        ("POST", f"/helix/api/sessions/{sid}/?format=api", [auth], 405),
        ("POST", f"/helix/api/sessions/{sid}/snapshot", [html, auth], 405),
        ("GET", f"/helix/api/sessions/{sid}/runs/run_unknown/recovery?format=api", [auth], 404),
        ("GET", "/helix/api/sessions/a/b/c/d", [html, auth], 404),
    ]
    for method, path, headers, status in cases:
        assert_typed(*await call(method, path, headers), status, f"{method} {path} {headers[:1]}")


async def test_a_success_is_still_rendered_by_the_hosts_browsable_api(owner):
    _sid, auth = owner
    status, content_type, _body = await call("GET", "/helix/api/sessions/?format=api", [auth])
    assert (status, content_type) == (200, b"text/html; charset=utf-8")
