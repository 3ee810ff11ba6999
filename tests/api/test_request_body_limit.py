"""The REST API bounds request bodies by ``MAX_REQUEST_BYTES``, as the chat route does, over daphne.

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB by default) does not govern helix's bodies:
a body under ``MAX_REQUEST_BYTES`` (10 MiB by default) is accepted, a body over it is the
typed 413 ``validation_payload_too_large`` (``cause: "request_body"``, ``limitBytes``,
``sizeBytes``), declared or chunked, never Django's ``RequestDataTooBig`` as a 500.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from helix_django.api.errors import helix_exception_handler
from helix_django.conf import helix_settings
from helix_django.models import ChatSession
from tests.live import LiveServer
from tests.transport.conftest import new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DJANGO_LIMIT = 2_621_440  # Django's default DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB)
HELIX_LIMIT = 10 * 1024 * 1024  # helix's default MAX_REQUEST_BYTES
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    """daphne with the suite's settings: Django's and helix's default body limits."""
    with django_db_blocker.unblock():
        live = LiveServer().start()
    yield live
    live.stop()


def create_body(session_id: str, size: int) -> bytes:
    """A ``POST sessions/`` body of ``size`` bytes (an ignored field pads it)."""
    head = json.dumps({"id": session_id, "title": "big", "padding": ""}).encode()
    return head[:-2] + b"x" * (size - len(head)) + b'"}'


def test_the_defaults_are_djangos_and_helixs(transactional_db):
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == DJANGO_LIMIT
    assert helix_settings.MAX_REQUEST_BYTES == HELIX_LIMIT


def test_a_body_over_djangos_limit_and_under_max_request_bytes_is_accepted(server, api):
    sid = new_session_id()
    body = create_body(sid, 3 * 1024 * 1024)
    response = api().post(server.url("/helix/api/sessions/"), content=body, headers=JSON)
    assert response.status_code == 201, response.text
    assert response.json()["id"] == sid and response.json()["title"] == "big"


def test_a_chunked_body_under_max_request_bytes_is_parsed(server, api):
    sid = new_session_id()
    body = create_body(sid, 3 * 1024 * 1024)
    response = api().post(server.url("/helix/api/sessions/"), content=iter([body[:1000], body[1000:]]), headers=JSON)
    assert "content-length" not in response.request.headers
    assert response.status_code == 201, response.text
    assert response.json()["id"] == sid


def test_a_body_over_max_request_bytes_is_the_typed_413(server, api):
    sid = new_session_id()
    body = create_body(sid, HELIX_LIMIT + 1)
    response = api().post(server.url("/helix/api/sessions/"), content=body, headers=JSON)
    assert response.status_code == 413, response.text
    assert response.json() == {
        "error": "Request body too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "request_body",
        "limitBytes": HELIX_LIMIT,
        "sizeBytes": len(body),
    }
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_a_chunked_body_over_max_request_bytes_is_the_typed_413(server, api):
    sid = new_session_id()
    body = create_body(sid, HELIX_LIMIT + 4096)

    def chunks():
        for start in range(0, len(body), 256 * 1024):
            yield body[start : start + 256 * 1024]

    response = api().post(server.url("/helix/api/sessions/"), content=chunks(), headers=JSON)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text
    assert response.json()["code"] == "validation_payload_too_large"
    assert response.json()["limitBytes"] == HELIX_LIMIT and response.json()["sizeBytes"] == len(body)
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_djangos_request_data_too_big_is_the_typed_413_never_a_500(rf):
    request = rf.post("/helix/api/sessions/", data=b"{}", content_type="application/json")
    request.META["CONTENT_LENGTH"] = str(DJANGO_LIMIT + 1)
    response = helix_exception_handler(RequestDataTooBig("too big"), {"request": request})
    assert response.status_code == 413
    assert response.data == {
        "error": "Request body too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "request_body",
        "limitBytes": DJANGO_LIMIT,
        "sizeBytes": DJANGO_LIMIT + 1,
    }
