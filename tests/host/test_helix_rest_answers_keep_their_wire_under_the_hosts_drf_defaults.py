"""Helix's REST views speak helix's wire whatever the host's ``REST_FRAMEWORK`` defaults say.

Seen on a live host site:

- an enveloping ``DEFAULT_RENDERER_CLASSES`` renderer (``{"data": ...}``) wrapped the snapshot,
  the lists and the typed errors;
- form-only ``DEFAULT_PARSER_CLASSES`` (``FormParser``, ``MultiPartParser``) refused the JSON
  bodies of ``POST sessions/`` and ``POST .../tool-results`` with 415;
- DRF's ``DATETIME_FORMAT`` (``"%d/%m/%Y %H:%M"``) or ``USE_TZ = False`` turned ``createdAt``
  into a local time without an offset.

Helix's views render with helix's JSON renderer, parse ``application/json`` with helix's
parser, and write every timestamp as ISO 8601 in UTC (``...Z``).
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tests.host.sites import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: ISO 8601 in UTC, as helix writes every timestamp.
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def a_turn(site, user: str = "alice") -> tuple[str, str]:
    """Send one turn as ``user``; return ``(session id, run id)``."""
    sid = new_session_id()
    assert site.send(sid, user).status_code == 200
    runs = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/", user).json()
    results = runs["results"] if isinstance(runs, dict) and "results" in runs else runs["data"]["results"]
    return sid, results[0]["id"]


def test_an_enveloping_host_renderer_does_not_reshape_helixs_answers(host_site):
    site = host_site("envelope_renderer")
    assert site.request("GET", "/helix/api/host-status/").json() == {"host": "ok"}  # not DRF: a control
    sid, run_id = a_turn(site)

    snapshot = site.request("GET", f"{PREFIX}/sessions/{sid}/snapshot", "alice")
    assert snapshot.status_code == 200
    assert snapshot.headers["content-type"] == "application/json"
    assert snapshot.json()["sessionId"] == sid and "data" not in snapshot.json()
    assert site.request("GET", f"{PREFIX}/sessions/{sid}/", "alice").json()["id"] == sid
    assert site.request("GET", f"{PREFIX}/sessions/", "alice").json()["results"][0]["id"] == sid
    recovery = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/{run_id}/recovery", "alice").json()
    assert recovery["runId"] == run_id

    missing = site.request("GET", f"{PREFIX}/sessions/{new_session_id()}/snapshot", "alice")
    assert missing.status_code == 404 and missing.json()["code"] == "state_session_not_found"
    refused = site.request("GET", f"{PREFIX}/sessions/?format=xml", "alice")
    assert refused.status_code == 406 and refused.json()["cause"] == "format"


def test_form_only_host_parsers_still_let_helix_take_json(host_site):
    site = host_site("form_parsers")
    sid, run_id = a_turn(site)

    created = site.request("POST", f"{PREFIX}/sessions/", "alice", json={"id": new_session_id(), "title": "Plans"})
    assert created.status_code == 201, created.text
    assert created.json()["title"] == "Plans"

    body = {"results": [{"toolCallId": "call_unknown", "output": {"ok": True}}]}
    late = site.request("POST", f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results", "alice", json=body)
    assert late.status_code != 415, late.text
    assert late.status_code in (200, 400, 409), late.text
    assert late.headers["content-type"] == "application/json"

    not_a_body = site.request(
        "POST", f"{PREFIX}/sessions/", "alice", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert not_a_body.status_code == 400 and not_a_body.json()["cause"] == "json"


def assert_utc_now(value: str) -> None:
    """``value`` is ISO 8601 in UTC and within five minutes of now."""
    assert ISO_UTC.match(value), value
    moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert abs(moment - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5), value


@pytest.mark.parametrize("profile", ["datetime_format", "no_tz"])
def test_timestamps_are_iso_8601_in_utc_whatever_the_hosts_datetime_settings(host_site, profile):
    site = host_site(profile)
    sid, _run_id = a_turn(site)

    session = site.request("GET", f"{PREFIX}/sessions/{sid}/", "alice").json()
    assert_utc_now(session["createdAt"])
    assert_utc_now(session["updatedAt"])
    listed = site.request("GET", f"{PREFIX}/sessions/", "alice").json()["results"][0]
    assert listed["createdAt"] == session["createdAt"]
    run = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/", "alice").json()["results"][0]
    for field in ("createdAt", "startedAt", "finishedAt"):
        assert_utc_now(run[field])
