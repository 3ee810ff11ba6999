"""The DRF exception handler, CSRF, throttling and snapshot failures (in-process, real views and database)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from helix_django import snapshot as snapshot_module
from helix_django import store
from helix_django.errors import HistoryIncompleteError
from helix_django.models import ChatSession

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def user():
    return get_user_model().objects.create_user(username="alice", password="pw-not-secret")


@pytest.fixture
def client(user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_session_auth_post_needs_the_csrf_token(client):
    refused = client.post("/helix/api/sessions/", {"id": "chat_csrf"}, format="json")
    assert refused.status_code == 403
    assert refused.json() == {
        "error": "CSRF check failed",
        "code": "auth_permission_denied",
        "retryable": False,
        "cause": "csrf",
    }
    client.get("/helix/api/sessions/")  # any page; the test sets the token cookie below
    from django.middleware.csrf import _get_new_csrf_string

    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    accepted = client.post("/helix/api/sessions/", {"id": "chat_csrf"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201


def test_malformed_json_and_media_type_and_method(client, user):
    client.handler.enforce_csrf_checks = False
    bad_json = client.post("/helix/api/sessions/", "{nope", content_type="application/json")
    assert bad_json.status_code == 400 and bad_json.json()["cause"] == "json"
    media = client.post("/helix/api/sessions/", "id=x", content_type="text/plain")
    assert media.status_code == 415 and media.json()["code"] == "validation_unsupported_media_type"
    method = client.put("/helix/api/sessions/", {}, format="json")
    assert method.status_code == 405 and method.json()["code"] == "validation_method_not_allowed"


def test_anonymous_is_401_unless_allowed():
    anonymous = APIClient()
    response = anonymous.get("/helix/api/sessions/")
    assert response.status_code == 401 and response.json()["code"] == "auth_not_authenticated"
    with override_settings(HELIX={"ALLOW_ANONYMOUS": True}):
        created = anonymous.post("/helix/api/sessions/", {"id": "chat_anon"}, format="json")
        assert created.status_code == 201
        assert [s["id"] for s in anonymous.get("/helix/api/sessions/").json()] == ["chat_anon"]
        stranger = APIClient()
        assert stranger.get("/helix/api/sessions/chat_anon/").status_code in (401, 404)
        stranger.post("/helix/api/sessions/", {"id": "chat_other"}, format="json")
        assert stranger.get("/helix/api/sessions/chat_anon/").status_code == 404


@override_settings(
    REST_FRAMEWORK={
        "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"helix": "2/min"},
    }
)
def test_throttling_is_configurable_and_typed(client, monkeypatch):
    from django.core.cache import cache
    from rest_framework.throttling import ScopedRateThrottle

    # DRF copies the rates into the class when rest_framework.throttling is first imported.
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"helix": "2/min"})
    cache.clear()
    assert client.get("/helix/api/sessions/").status_code == 200
    assert client.get("/helix/api/sessions/").status_code == 200
    limited = client.get("/helix/api/sessions/")
    assert limited.status_code == 429
    assert limited.json()["code"] == "rate_limited" and limited.json()["retryable"] is True
    assert int(limited.headers["Retry-After"]) >= 1


def test_snapshot_read_failures_are_typed(client, user, monkeypatch):
    store.get_or_create_session("chat_snap", owner_id=user.pk)

    async def unstable(*args, **kwargs):
        raise HistoryIncompleteError(cause="snapshot_unstable")

    monkeypatch.setattr("helix_django.api.views.abuild_snapshot", unstable)
    response = client.get("/helix/api/sessions/chat_snap/snapshot")
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert response.json() == {
        "error": "Conversation history is temporarily unavailable",
        "code": "state_history_incomplete",
        "retryable": True,
        "cause": "snapshot_unstable",
    }

    async def corrupt(*args, **kwargs):
        raise HistoryIncompleteError(cause="corrupt_row")

    monkeypatch.setattr("helix_django.api.views.abuild_snapshot", corrupt)
    response = client.get("/helix/api/sessions/chat_snap/snapshot")
    assert response.status_code == 409 and response.json()["cause"] == "corrupt_row"

    async def broken(*args, **kwargs):
        raise RuntimeError("db password=hunter2 in the message")

    monkeypatch.setattr("helix_django.api.views.abuild_snapshot", broken)
    response = client.get("/helix/api/sessions/chat_snap/snapshot")
    assert response.status_code == 503
    assert response.json() == {"error": "Snapshot unavailable", "code": "transport_error"}
    assert "hunter2" not in response.content.decode()


def test_snapshot_of_a_real_session(client, user):
    store.get_or_create_session("chat_real", owner_id=user.pk)
    response = client.get("/helix/api/sessions/chat_real/snapshot")
    assert response.status_code == 200
    assert response.json() == snapshot_module.build_snapshot("chat_real")


def test_delete_when_the_current_run_vanished_since_the_session_read_is_204(user, monkeypatch):
    # The race of two DELETEs of one session: the session was read while its run existed,
    # and the run was gone by the live check. A vanished run is not live: 204, not a 500.
    store.get_or_create_session("chat_race", owner_id=user.pk)
    stale = ChatSession.objects.get(pk="chat_race")
    stale.current_run_id = "run_deleted_meanwhile"
    monkeypatch.setattr("helix_django.api.base.get_owned_session", lambda session_id, owner: stale)
    client = APIClient()
    client.force_login(user)
    response = client.delete("/helix/api/sessions/chat_race/")
    assert response.status_code == 204
    assert not ChatSession.objects.filter(pk="chat_race").exists()


def test_delete_never_removes_a_session_reused_by_someone_else_after_the_read(user, monkeypatch):
    # Session ids are chosen by clients: after a concurrent delete, another user may own the
    # same id. The stale read's run is gone, so the view reads again and finds no session of its own.
    from helix_django.api import base

    other = get_user_model().objects.create_user(username="bob", password="pw-not-secret")
    store.get_or_create_session("chat_reused", owner_id=other.pk)
    stale = ChatSession(pk="chat_reused", owner_id=user.pk, current_run_id="run_deleted_meanwhile")
    real = base.get_owned_session
    reads = iter([lambda *args: stale, real])
    monkeypatch.setattr(base, "get_owned_session", lambda *args: next(reads)(*args))
    client = APIClient()
    client.force_login(user)
    response = client.delete("/helix/api/sessions/chat_reused/")
    assert response.status_code == 404 and response.json()["code"] == "state_session_not_found"
    assert ChatSession.objects.filter(pk="chat_reused", owner_id=other.pk).exists()
