"""Chat-route failures that need a fault injected, through Channels' HttpCommunicator (same ASGI app as daphne)."""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.errors import HistoryIncompleteError
from helix_django.models import ChatSession
from tests.transport.conftest import new_session_id, send_body, user_message

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token_header(transactional_db):
    user = get_user_model().objects.create_user(username="carol", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def call(method, path, header, body=b"", extra=()):
    from tests.asgi import application

    communicator = HttpCommunicator(application, method, path, body=body, headers=[header, *extra])
    response = await communicator.get_response(timeout=10)
    return response["status"], dict(response["headers"]), response["body"]


async def test_an_unexpected_failure_is_a_typed_500_without_its_text(token_header, monkeypatch, caplog):
    user, header = token_header

    async def explode(*args, **kwargs):
        raise RuntimeError("prompt text: my secret")

    monkeypatch.setattr("helix_django.transport.chat.plan_chat", explode)
    await store.aget_or_create_session("chat_x", owner_id=user.pk)  # read with the authentication, before planning
    status, _headers, body = await call("GET", "/helix/api/sessions/chat_x/chat", header)
    assert status == 500
    assert json.loads(body) == {"error": "Internal error", "code": "framework_internal_error", "retryable": False}
    assert b"secret" not in body
    assert "RuntimeError" in caplog.text and "secret" not in caplog.text


async def test_a_failed_prefix_read_is_a_retryable_503(token_header, monkeypatch):
    user, header = token_header
    sid = new_session_id()
    await store.aget_or_create_session(sid, owner_id=user.pk)

    async def unstable(*args, **kwargs):
        raise HistoryIncompleteError(cause="snapshot_unstable")

    monkeypatch.setattr("helix_django.transport.resume.abuild_snapshot", unstable)
    extra = [(b"x-existing-message-id", b"msg_1"), (b"x-helix-replay-prefix", b"1")]
    status, headers, body = await call("GET", f"/helix/api/sessions/{sid}/chat", header, extra=extra)
    assert status == 503 and headers[b"retry-after"] == b"1"
    assert json.loads(body)["code"] == "state_history_incomplete" and json.loads(body)["retryable"] is True


async def test_a_refusal_before_the_run_start_commit_leaves_no_session(token_header):
    _user, header = token_header
    sid = new_session_id()
    body = json.dumps({**send_body(sid, [user_message("hi")]), "trigger": "regenerate-message"}).encode()
    status, _headers, raw = await call("POST", f"/helix/api/sessions/{sid}/chat", header, body=body)
    assert status == 409 and json.loads(raw)["code"] == "state_run_not_actionable"
    assert not await ChatSession.objects.filter(pk=sid).aexists()


async def test_the_chat_route_applies_the_hosts_throttles(token_header, monkeypatch):
    from django.core.cache import cache
    from django.test import override_settings
    from rest_framework.throttling import ScopedRateThrottle

    # DRF copies the rates into the class when rest_framework.throttling is first imported.
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"helix_chat": "2/min"})

    user, header = token_header
    sid = new_session_id()
    await store.aget_or_create_session(sid, owner_id=user.pk)
    throttled = {
        "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"helix_chat": "2/min"},
    }
    with override_settings(REST_FRAMEWORK=throttled):
        cache.clear()
        assert (await call("GET", f"/helix/api/sessions/{sid}/chat", header))[0] == 204
        assert (await call("GET", f"/helix/api/sessions/{sid}/chat", header))[0] == 204
        status, headers, body = await call("GET", f"/helix/api/sessions/{sid}/chat", header)
    assert status == 429 and int(headers[b"retry-after"]) >= 1
    assert json.loads(body)["code"] == "rate_limited" and json.loads(body)["retryable"] is True
