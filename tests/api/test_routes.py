"""Unknown paths under the API prefix answer typed JSON; the schema names the app."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

import helix_django

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    client = APIClient()
    client.force_login(get_user_model().objects.create_user("alice", password="pw"))
    return client


@pytest.mark.parametrize(
    "path",
    [
        "/helix/api/sessions/s1/nope",
        "/helix/api/sessions/s1/runs/r1/explode",
        "/helix/api/sessions/x/y/z/",
        # a trailing slash on a streaming route, the AI SDK's default shapes included
        "/helix/api/sessions/s1/chat/",
        "/helix/api/chat/",
        "/helix/api/chat/s1/stream/",
        "/helix/api/chat/s1/nope",
    ],
)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_unknown_paths_are_typed_404s(client, path, method):
    response = getattr(client, method)(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"error": "Not found", "code": "not_found", "retryable": False}


@pytest.mark.parametrize("path", ["/helix/api/chat", "/helix/api/chat/s1/stream"])
def test_the_aisdk_routes_without_the_asgi_routing_are_refused_as_not_wired(client, path):
    """Reached through Django (no helix routing in asgi.py): 501, as the chat route's stand-in answers."""
    response = client.post(path, {}, format="json")
    assert response.status_code == 501
    assert response.json()["code"] == "transport_route_not_wired"


@override_settings(APPEND_SLASH=True, DEBUG=True)
def test_the_session_list_without_its_slash_is_the_session_list(client):
    """A host with APPEND_SLASH (Django's default) turned a POST to ``sessions`` into an HTML 500 under DEBUG."""
    created = client.post("/helix/api/sessions", {"id": "unslashed-1"}, format="json")
    assert created.status_code == 201, created.content[:200]
    listed = client.get("/helix/api/sessions")
    assert listed.status_code == 200
    assert listed.json() == client.get("/helix/api/sessions/").json()


def test_anonymous_unknown_path_is_still_json():
    response = APIClient().get("/helix/api/sessions/s1/does-not-exist")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


def test_schema_names_the_app_and_its_version(client):
    response = client.get("/helix/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    info = response.json()["info"]
    assert (info["title"], info["version"]) == ("helix_django", helix_django.__version__)
