"""The list endpoints and pagination in the default profile (no host pagination; issue 19).

Without a paginator the lists stay as before: a plain JSON list, newest first, at most 100.
The host's ``DEFAULT_PAGINATION_CLASS`` is honoured when set, and ``HELIX["PAGINATION_CLASS"]``
overrides it. In process, through the suite's ASGI application.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.models import ChatSession
from tests.paginators import PagesOfThree

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(transactional_db):
    user = get_user_model().objects.create_user(username="erin", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


def make_sessions(user, count):
    for index in range(count):
        session, _created = store.get_or_create_session(f"chat_page_{index:03d}", owner_id=user.pk)
        ChatSession.objects.filter(pk=session.pk).update(title=f"t{index}")
    return [f"chat_page_{index:03d}" for index in reversed(range(count))]


async def get_json(path, header):
    from tests.asgi import application

    response = await HttpCommunicator(application, "GET", path, headers=[header]).get_response(timeout=20)
    assert response["status"] == 200, response["body"]
    return json.loads(response["body"])


async def test_without_a_paginator_the_list_is_plain_newest_first_and_capped(owner):
    user, header = owner
    newest_first = await sync_to_async(make_sessions)(user, 102)
    body = await get_json("/helix/api/sessions/", header)
    assert [s["id"] for s in body] == newest_first[:100]


async def test_the_hosts_default_pagination_class_is_honoured(owner, settings):
    user, header = owner
    newest_first = await sync_to_async(make_sessions)(user, 5)
    rest = {**getattr(settings, "REST_FRAMEWORK", {})}
    settings.REST_FRAMEWORK = {**rest, "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination"}
    body = await get_json("/helix/api/sessions/?limit=2&offset=2", header)
    assert body["count"] == 5 and [s["id"] for s in body["results"]] == newest_first[2:4]
    assert [s["id"] for s in await get_json("/helix/api/sessions/", header)] == newest_first  # no limit: a list


async def test_the_helix_setting_overrides_the_hosts_pagination(owner, settings):
    user, header = owner
    newest_first = await sync_to_async(make_sessions)(user, 5)
    settings.HELIX = {"PAGINATION_CLASS": "tests.paginators.PagesOfThree"}
    body = await get_json("/helix/api/sessions/?page=2", header)
    assert body["count"] == 5 and [s["id"] for s in body["results"]] == newest_first[3:]
    settings.HELIX = {"PAGINATION_CLASS": PagesOfThree}
    assert len((await get_json("/helix/api/sessions/", header))["results"]) == 3


async def test_the_schema_shows_a_plain_list_without_a_paginator(owner):
    _user, header = owner
    schema = await get_json("/helix/api/schema/?format=json", header)
    listed = schema["paths"]["/helix/api/sessions/"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listed["schema"]["type"] == "array"
