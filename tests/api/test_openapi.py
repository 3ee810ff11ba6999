"""The OpenAPI schema describes every HTTP route and every wire code, and is a valid OpenAPI document."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from openapi_spec_validator import validate
from rest_framework.test import APIClient

import helix_django
from helix_django.api.urls import endpoint_patterns
from helix_django.errors import HelixError

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        response = APIClient().get("/helix/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def all_wire_codes() -> set[str]:
    """Every code of every HelixError subclass defined anywhere in the package."""
    for module in pkgutil.walk_packages(helix_django.__path__, "helix_django."):
        if ".management." not in module.name and ".migrations" not in module.name:
            importlib.import_module(module.name)
    codes, pending = set(), [HelixError]
    while pending:
        cls = pending.pop()
        codes.add(cls.code)
        pending.extend(cls.__subclasses__())
    return codes


def test_the_schema_is_a_valid_openapi_document(schema):
    validate(schema)


def test_every_http_route_is_an_operation_with_a_named_id(schema):
    assert len(schema["paths"]) == len(endpoint_patterns)
    chat = schema["paths"]["/helix/api/sessions/{session_id}/chat"]
    assert (chat["get"]["operationId"], chat["post"]["operationId"]) == ("resumeChat", "sendChat")
    assert "text/event-stream" in chat["post"]["responses"]["200"]["content"]
    assert schema["paths"]["/helix/api/sessions/{session_id}/stream"]["get"]["operationId"] == "streamSession"
    ids = [op["operationId"] for ops in schema["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) and not [i for i in ids if "_" in i], ids
    assert "ws/<prefix>sessions/{session_id}/" in schema["info"]["description"]


def test_every_wire_code_is_declared_and_every_refusal_has_the_typed_body(schema):
    body = schema["components"]["schemas"]["HelixErrorBody"]
    enum_ref = body["properties"]["code"]["allOf"][0]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][enum_ref]["enum"]) == all_wire_codes()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            refusals = {int(status) for status in op["responses"] if int(status) >= 400}
            assert {401, 403, 404, 405, 406, 429, 500} <= refusals, (method, path)
            for status in refusals:
                content = op["responses"][str(status)]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/HelixErrorBody"}
            assert "Retry-After" in op["responses"]["429"]["headers"]
    send = schema["paths"]["/helix/api/sessions/{session_id}/chat"]["post"]["responses"]
    assert {"413", "415", "503"} <= set(send) and "Retry-After" in send["503"]["headers"]


def test_the_snapshot_response_has_its_body_schema(schema):
    ok = schema["paths"]["/helix/api/sessions/{session_id}/snapshot"]["get"]["responses"]["200"]
    ref = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = set(schema["components"]["schemas"][ref]["properties"])
    assert {"sessionId", "messages", "streamSequence", "status", "state"} <= fields


def test_the_schema_view_authenticates_as_every_helix_route():
    """An invalid token is refused on the schema view as on the chat route (helix's policy, not the host's defaults)."""
    client = APIClient()
    bad = {"HTTP_AUTHORIZATION": "Token not-a-token"}
    assert client.get("/helix/api/sessions/", **bad).json()["code"] == "auth_failed"
    response = client.get("/helix/api/schema/", **bad)
    assert (response.status_code, response["Content-Type"]) == (401, "application/json"), response.content[:200]
    assert response.json()["code"] == "auth_failed"
    assert client.get("/helix/api/schema/").status_code == 200  # no credential: the schema is public


def test_the_send_operation_documents_its_multitask_strategy(schema):
    send = schema["paths"]["/helix/api/sessions/{session_id}/chat"]["post"]
    header = next(p for p in send["parameters"] if p["name"] == "X-Helix-Multitask")
    assert header["in"] == "header" and sorted(header["schema"]["enum"]) == ["enqueue", "interrupt", "reject"]
    ref = send["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    field = schema["components"]["schemas"][ref]["properties"]["multitask"]
    choices = schema["components"]["schemas"][field["allOf"][0]["$ref"].rsplit("/", 1)[-1]]
    assert sorted(choices["enum"]) == ["enqueue", "interrupt", "reject"]
