"""The OpenAPI schema view's refusals are typed JSON, as every other helix endpoint's.

drf-spectacular's view rendered its refusals with its own first renderer and DRF's default
handler: ``?format=xml`` was a YAML ``detail: Not found`` (404), a bad ``Authorization``
header a YAML 401. Now a format the schema view lacks is 406 ``validation_not_acceptable``
(``cause: "format"``), a bad credential 401 ``auth_failed``, in JSON; the
schema itself is still served as YAML or JSON.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from tests.host.conftest import HOST, assert_not_acceptable, call, content_type

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = "/helix/api/schema/"


async def test_a_format_the_schema_view_lacks_is_a_typed_406_in_json():
    assert_not_acceptable(*await call("GET", f"{SCHEMA}?format=xml", [HOST]))


async def test_a_bad_credential_on_the_schema_view_is_a_typed_401_in_json():
    status, headers, body = await call("GET", SCHEMA, [HOST, (b"authorization", b"Bearer not-a-jwt")])
    assert (status, content_type(headers)) == (401, b"application/json"), body
    assert json.loads(body)["code"] == "auth_failed"


async def test_the_schema_is_still_served_as_yaml_and_as_json(jwt_user):
    _user, auth = jwt_user
    status, headers, body = await call("GET", SCHEMA, [HOST, auth])
    assert status == 200 and content_type(headers).startswith(b"application/vnd.oai.openapi"), body[:200]
    assert body.startswith(b"openapi: 3"), body[:80]
    status, headers, body = await call("GET", f"{SCHEMA}?format=json", [HOST, auth])
    assert status == 200 and json.loads(body)["info"]["title"] == "helix_django"


async def test_a_throttled_schema_request_is_a_typed_429_in_json(settings):
    from django.core.cache import cache

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"helix": "1/min"}}
    await sync_to_async(cache.clear)()
    assert (await call("GET", SCHEMA, [HOST]))[0] == 200
    status, headers, body = await call("GET", SCHEMA, [HOST])
    assert (status, content_type(headers)) == (429, b"application/json"), body
    assert json.loads(body)["code"] == "rate_limited"
    assert int({k.lower(): v for k, v in headers.items()}[b"retry-after"]) >= 1
