"""A typed ``validation_error``'s ``fields`` is helix's shape under any ``NON_FIELD_ERRORS_KEY`` of the host.

A body that is no JSON object is refused as a whole: ``fields`` is ``["non_field_errors"]``
(docs/transport.md, "Wire errors"), never the key the host's ``REST_FRAMEWORK`` names for
its own serializers.
"""

from __future__ import annotations

import json

import pytest

from tests.host.conftest import HOST, call

pytestmark = pytest.mark.django_db(transaction=True)

JSON = (b"content-type", b"application/json")


@pytest.mark.parametrize("host_key", ["errors", "__all__", None])
async def test_a_body_refused_as_a_whole_names_non_field_errors(jwt_user, settings, host_key):
    if host_key is not None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NON_FIELD_ERRORS_KEY": host_key}
    _user, auth = jwt_user
    for body in (b"[]", b'"a title"', b"7"):
        status, _headers, raw = await call("POST", "/helix/api/sessions/", [HOST, auth, JSON], body)
        assert (status, json.loads(raw)) == (
            400,
            {
                "error": "Invalid request body",
                "code": "validation_error",
                "retryable": False,
                "cause": "body",
                "fields": ["non_field_errors"],
            },
        ), body


async def test_a_field_is_named_as_before_under_the_hosts_key(jwt_user, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NON_FIELD_ERRORS_KEY": "errors"}
    _user, auth = jwt_user
    status, _headers, raw = await call("POST", "/helix/api/sessions/", [HOST, auth, JSON], b'{"id": "has spaces"}')
    assert (status, json.loads(raw)["fields"]) == (400, ["id"])
