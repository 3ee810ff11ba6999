"""Wire errors in the request's language: the human ``error`` is translated, the ``code`` is not.

The ``errorDetail`` kept on a failed run stays English: it is stored once and read later by
whoever opens the run.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import translation

from helix_django.errors import AlreadyRunningError, SessionNotFoundError


def test_the_message_is_german_in_a_german_request_and_the_code_english():
    with translation.override("de"):
        body = SessionNotFoundError().to_body()
        detail = AlreadyRunningError().to_detail()
    assert body == {"error": "Sitzung nicht gefunden", "code": "state_session_not_found", "retryable": False}
    assert detail == {
        "code": "state_already_running",
        "category": "state",
        "retryable": True,
        "message": "A run is already active on this session",
    }
    with translation.override("en"):
        assert SessionNotFoundError().to_body()["error"] == "Session not found"


@pytest.mark.django_db
def test_a_german_browser_gets_a_german_refusal_over_http(settings):
    session, *others = settings.MIDDLEWARE
    settings.MIDDLEWARE = [session, "django.middleware.locale.LocaleMiddleware", *others]
    client = Client()
    client.force_login(get_user_model().objects.create_user("de-reader", password="pw"))
    response = client.get("/helix/api/sessions/s_missing/snapshot", HTTP_ACCEPT_LANGUAGE="de")
    assert response.status_code == 404
    assert response.json()["code"] == "state_session_not_found"
    assert response.json()["error"] == "Sitzung nicht gefunden"
