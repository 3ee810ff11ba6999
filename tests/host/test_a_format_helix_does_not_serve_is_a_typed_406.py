"""``?format=`` on helix's REST views: the host's renderers decide, and a format they lack is a typed 406.

DRF's content negotiation raises ``Http404`` for a ``format`` no renderer has; helix answered
that as 404 ``state_session_not_found``, on the session list too. Now it is 406
``validation_not_acceptable`` with ``cause: "format"`` on every list and detail view, in
JSON; a format the host's renderers serve (the browsable API's ``api``) is served.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from rest_framework.settings import api_settings

from helix_django import store
from helix_django.models import Run
from tests.host.conftest import HOST, assert_not_acceptable, call, content_type

pytestmark = pytest.mark.django_db(transaction=True)


def make_session(user) -> str:
    session, _created = store.get_or_create_session("s_format_1", owner_id=user.pk)
    Run.objects.create(id="run_format_1", session_id=session.pk, status="completed")
    return session.pk


def views(sid: str) -> list[str]:
    base = "/helix/api/sessions/"
    return [base, f"{base}{sid}/", f"{base}{sid}/snapshot", f"{base}{sid}/runs/"]


async def test_a_format_no_host_renderer_has_is_a_typed_406_on_every_view(jwt_user):
    user, auth = jwt_user
    sid = await sync_to_async(make_session)(user)
    for path in views(sid):
        assert_not_acceptable(*await call("GET", f"{path}?format=xml", [HOST, auth]))


async def test_the_browsable_api_is_served_where_the_host_renders_it(jwt_user):
    user, auth = jwt_user
    sid = await sync_to_async(make_session)(user)
    for path in views(sid):
        status, headers, body = await call("GET", f"{path}?format=api", [HOST, auth])
        assert (status, content_type(headers)) == (200, b"text/html; charset=utf-8"), (path, body[:200])


async def test_format_api_on_a_json_only_host_is_a_typed_406(jwt_user, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    }
    assert [cls.format for cls in api_settings.DEFAULT_RENDERER_CLASSES] == ["json"]
    user, auth = jwt_user
    sid = await sync_to_async(make_session)(user)
    for path in views(sid):
        assert_not_acceptable(*await call("GET", f"{path}?format=api", [HOST, auth]))
    status, _headers, body = await call("GET", f"{views(sid)[0]}?format=json", [HOST, auth])
    assert status == 200 and json.loads(body)["results"][0]["id"] == sid
