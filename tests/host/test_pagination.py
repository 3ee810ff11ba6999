"""The list endpoints honour the host's DRF pagination (issue 19): ``PageNumberPagination``, ``PAGE_SIZE`` 2.

The sessions and runs lists answer the host's page shape ``{count, next, previous, results}``,
newest first, and the schema describes that shape; ``HELIX["PAGINATION_CLASS"] = ""`` turns
it off for helix's lists only.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from helix_django import store
from helix_django.models import ChatSession, Run
from tests.host.conftest import HOST, call

pytestmark = pytest.mark.django_db(transaction=True)


def make_sessions(user, count):
    ids = []
    for index in range(count):
        session, _created = store.get_or_create_session(f"s_page_{index}", owner_id=user.pk)
        ChatSession.objects.filter(pk=session.pk).update(title=f"t{index}")  # newest last
        ids.append(session.pk)
    return ids[::-1]


async def get_json(path, auth):
    status, _headers, body = await call("GET", path, [HOST, auth])
    assert status == 200, body
    return json.loads(body)


async def test_the_sessions_list_is_paginated_like_the_hosts_lists(jwt_user):
    user, auth = jwt_user
    newest_first = await sync_to_async(make_sessions)(user, 3)
    first = await get_json("/helix/api/sessions/", auth)
    assert (first["count"], first["previous"]) == (3, None)
    assert first["next"] == "http://api.example/helix/api/sessions/?page=2"
    assert [s["id"] for s in first["results"]] == newest_first[:2]
    second = await get_json("/helix/api/sessions/?page=2", auth)
    assert ([s["id"] for s in second["results"]], second["next"]) == (newest_first[2:], None)
    status, _headers, body = await call("GET", "/helix/api/sessions/?page=9", [HOST, auth])
    assert status == 404 and (json.loads(body)["code"], json.loads(body)["cause"]) == ("not_found", "page")


async def test_the_runs_list_is_paginated_too(jwt_user):
    user, auth = jwt_user
    [sid] = await sync_to_async(make_sessions)(user, 1)
    for index in range(3):
        await Run.objects.acreate(id=f"run_page_{index}", session_id=sid, status="completed")
    page = await get_json(f"/helix/api/sessions/{sid}/runs/", auth)
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"].endswith("?page=2")


async def test_a_helix_setting_turns_the_hosts_pagination_off_for_helix(jwt_user, settings):
    user, auth = jwt_user
    newest_first = await sync_to_async(make_sessions)(user, 3)
    settings.HELIX = {"PAGINATION_CLASS": ""}
    assert [s["id"] for s in await get_json("/helix/api/sessions/", auth)] == newest_first


async def test_the_schema_shows_the_paginated_shape(jwt_user):
    _user, auth = jwt_user
    status, _headers, body = await call("GET", "/helix/api/schema/?format=json", [HOST, auth])
    assert status == 200
    schema = json.loads(body)
    operations = {
        op["operationId"]: op for item in schema["paths"].values() for op in item.values() if isinstance(op, dict)
    }
    for operation, name in (("listSessions", "PaginatedSessionList"), ("listRuns", "PaginatedRunList")):
        ref = operations[operation]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{name}"
        shape = schema["components"]["schemas"][name]
        assert {"count", "next", "previous", "results"} <= set(shape["properties"])
