"""Fixtures of the "real host" profile: collected static files, JWT users, the host's ASGI app."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from rest_framework_simplejwt.tokens import AccessToken

from tests.host.sites import host_site  # noqa: F401

ORIGIN = "http://app.example"
HOST = (b"host", b"api.example")


@pytest.fixture(scope="session")
def collected_static(django_db_setup, django_db_blocker):
    """Run collectstatic once into STATIC_ROOT (ManifestStaticFilesStorage needs its manifest)."""
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(autouse=True)
def _static(collected_static):
    """Every test of the profile sees the collected static files (admin pages use {% static %})."""


@pytest.fixture
def jwt_user(transactional_db):
    """A user of the host's model (email login) and the ``Authorization: Bearer`` header of its JWT."""
    user = get_user_model().objects.create_user(email=f"{uuid.uuid4().hex[:8]}@host.example", password="pw-1")
    return user, (b"authorization", f"Bearer {AccessToken.for_user(user)}".encode())


def new_session_id() -> str:
    return f"s_{uuid.uuid4().hex}"


def send_body(session_id: str, text: str = "hello") -> bytes:
    message = {"id": f"msg_{uuid.uuid4().hex}", "role": "user", "parts": [{"type": "text", "text": text}]}
    return json.dumps({"id": session_id, "messages": [message]}).encode()


async def call(method: str, path: str, headers, body: bytes = b""):
    """Run one request through the host's ASGI application; return ``(status, headers dict, body)``."""
    from tests.host.asgi import application

    communicator = HttpCommunicator(application, method, path, body=body, headers=list(headers))
    response = await communicator.get_response(timeout=20)
    return response["status"], dict(response["headers"]), response["body"]


def content_type(headers) -> bytes:
    """The ``content-type`` of a response's headers dict (any case)."""
    return {name.lower(): value for name, value in headers.items()}[b"content-type"]


def assert_not_acceptable(status, headers, body):
    """Assert a typed 406 ``validation_not_acceptable`` (``cause: "format"``) in JSON."""
    assert (status, content_type(headers)) == (406, b"application/json"), body
    assert json.loads(body) == {
        "error": "Format not served",
        "code": "validation_not_acceptable",
        "retryable": False,
        "cause": "format",
    }
