"""A form body with more fields than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` is a typed 400 on helix's REST views.

Where the host parses forms (DRF's default ``FormParser`` and ``MultiPartParser``), Django
raises ``TooManyFieldsSent`` while DRF parses the body: ``POST sessions/`` and
``POST .../tool-results`` answered 500 ``framework_internal_error``. They answer 400
``validation_error`` (``cause: "body"``, ``limitFields``), as the chat route refuses a body it
cannot take.
"""

from __future__ import annotations

import pytest

from tests.host.sites import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Django's default ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` (the live site's).
LIMIT = 1000


def too_many_fields() -> dict[str, str]:
    return {f"f{index}": "x" for index in range(LIMIT + 1)}


def assert_typed_400(answer) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json() == {
        "error": "Too many form fields",
        "code": "validation_error",
        "retryable": False,
        "cause": "body",
        "limitFields": LIMIT,
    }


def test_too_many_form_fields_are_a_typed_400_on_helixs_rest_posts(host_site):
    site = host_site("plain")
    sid = new_session_id()
    assert site.send(sid, "alice").status_code == 200
    run_id = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/", "alice").json()["results"][0]["id"]
    for path in (f"{PREFIX}/sessions/", f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results"):
        assert_typed_400(site.request("POST", path, "alice", data=too_many_fields()))
        multipart = site.request("POST", path, "alice", data=too_many_fields(), files={"f": ("f.txt", b"x")})
        assert multipart.headers.get("content-type") == "application/json"
        assert_typed_400(multipart)
    created = site.request("POST", f"{PREFIX}/sessions/", "alice", data={"id": new_session_id()})
    assert created.status_code == 201, created.text  # a form within the limit is still taken
