"""``<prefix>schema`` without its slash is the schema view, as ``sessions`` is the session list.

Before, Django's ``APPEND_SLASH`` (``CommonMiddleware``) answered it: a GET was an HTML 301
and, under ``DEBUG`` (the example site's default), a POST, PUT or DELETE was Django's HTML
500 (it cannot redirect a body). Now the view answers: the schema, with the paths under the
prefix, or its typed 405. In process, through the suite's ASGI application.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator

pytestmark = pytest.mark.django_db(transaction=True)


async def call(method: str, path: str, body: bytes = b""):
    from tests.asgi import application

    headers = [(b"content-type", b"application/json")]
    response = await HttpCommunicator(application, method, path, headers=headers, body=body).get_response(timeout=20)
    content_type = {name.lower(): value for name, value in response["headers"]}.get(b"content-type", b"")
    return response["status"], content_type, response["body"]


@pytest.mark.parametrize("debug", [True, False])
async def test_a_method_the_schema_does_not_serve_is_a_typed_405_without_the_slash(settings, debug):
    settings.DEBUG = debug
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, content_type, body = await call(method, "/helix/api/schema", b"{}")
        assert (status, content_type) == (405, b"application/json"), (method, body[:200])
        assert json.loads(body)["code"] == "validation_method_not_allowed"


async def test_the_schema_is_served_without_the_slash_with_the_same_paths():
    status, _content_type, unslashed = await call("GET", "/helix/api/schema?format=json")
    assert status == 200, unslashed[:200]
    status, _content_type, slashed = await call("GET", "/helix/api/schema/?format=json")
    assert status == 200
    paths = json.loads(unslashed)["paths"]
    assert sorted(paths) == sorted(json.loads(slashed)["paths"])
    assert "/helix/api/sessions/{session_id}/snapshot" in paths
