"""Token authentication is offered only where ``rest_framework.authtoken`` is installed."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import modify_settings
from rest_framework.test import APIClient

from helix_django.access.policy import authenticators

pytestmark = pytest.mark.django_db


def test_token_auth_only_with_authtoken_installed():
    assert [type(a).__name__ for a in authenticators()] == [
        "SessionAuthentication",
        "BasicAuthentication",
        "TokenAuthentication",
    ]
    with modify_settings(INSTALLED_APPS={"remove": "rest_framework.authtoken"}):
        assert [type(a).__name__ for a in authenticators()] == ["SessionAuthentication", "BasicAuthentication"]


def test_a_token_header_without_authtoken_is_a_typed_refusal_not_a_500():
    with modify_settings(INSTALLED_APPS={"remove": "rest_framework.authtoken"}):
        response = APIClient().get("/helix/api/sessions/", HTTP_AUTHORIZATION="Token abc123")
    assert response.status_code == 401
    assert response.json()["code"] == "auth_not_authenticated"
    with_token_auth = APIClient().get("/helix/api/sessions/", HTTP_AUTHORIZATION="Token abc123")
    assert (with_token_auth.status_code, with_token_auth.json()["code"]) == (401, "auth_failed")


def test_session_auth_lists_own_sessions():
    user = get_user_model().objects.create_user("alice", password="pw")
    client = APIClient()
    client.force_login(user)
    response = client.get("/helix/api/sessions/")
    assert response.status_code == 200
