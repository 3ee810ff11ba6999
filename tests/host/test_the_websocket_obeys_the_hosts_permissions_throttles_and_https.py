"""The WebSocket obeys the host's DRF permissions and throttles and its https requirement, as HTTP does.

Seen on a live host site: under ``IsAdminUser`` a non-staff user was refused 403 over
HTTP but the socket accepted the same token, replayed the stream and started a run on
``send``; under ``UserRateThrottle`` every socket was accepted after HTTP said 429 and
sends counted against nothing; under ``SECURE_SSL_REDIRECT`` a cleartext ``ws://``
handshake was accepted. Refusals are the typed error frame and close ``4000 + status``.
"""

from __future__ import annotations

import json

import pytest

from helix_django.models import ChatSession, Run
from tests.host.sites import PREFIX, close_code, new_session_id, user_message, ws_frames

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120), pytest.mark.slow]

SEND = {"type": "send", "messages": [user_message("over the socket")]}


def _owned_session(user) -> str:
    sid = new_session_id()
    ChatSession.objects.create(id=sid, owner=user)
    return sid


def test_a_user_the_hosts_permission_refuses_gets_no_socket(host_site):
    site = host_site("admin_only")
    sid = _owned_session(site.users["alice"].user)
    assert site.request("GET", f"{PREFIX}/sessions/{sid}/", "alice").status_code == 403

    with site.ws(sid, "alice") as ws:
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and frame["code"] == "auth_permission_denied", frame
        assert close_code(ws) == 4403
    assert not Run.objects.filter(session_id=sid).exists()

    staff_sid = _owned_session(site.users["staff"].user)
    with site.ws(staff_sid, "staff") as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        assert json.loads(ws.recv(timeout=10))["code"] == "stream_not_found"  # admitted: the session has no stream yet


def test_socket_handshakes_and_sends_count_against_the_hosts_throttle(host_site):
    site = host_site("user_throttle")
    sid = _owned_session(site.users["alice"].user)
    with site.ws(sid, "alice") as ws:  # request 1: the handshake
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))  # request 2: every message is one
        assert json.loads(ws.recv(timeout=10))["code"] == "stream_not_found"
        for _ in range(2):  # requests 3 and 4
            ws.send(json.dumps({"type": "cancel", "run_id": "run_none"}))
            assert json.loads(ws.recv(timeout=10))["code"] != "rate_limited"
        ws.send(json.dumps(SEND))  # request 5: over 4/min, refused, nothing started
        frame = json.loads(ws.recv(timeout=10))
        assert frame["code"] == "rate_limited" and frame["retryable"] is True, frame
    assert not Run.objects.filter(session_id=sid).exists()
    assert site.request("GET", f"{PREFIX}/sessions/{sid}/", "alice").status_code == 429
    with site.ws(sid, "alice") as ws:
        frame = json.loads(ws.recv(timeout=10))
        assert frame["code"] == "rate_limited", frame
        assert close_code(ws) == 4429


def test_a_cleartext_handshake_is_refused_where_the_host_requires_https(host_site):
    site = host_site("ssl_redirect")
    sid = _owned_session(site.users["alice"].user)
    plain = site.request("GET", f"{PREFIX}/sessions/{sid}/", "alice", follow_redirects=False)
    assert plain.status_code == 301 and plain.headers["location"].startswith("https://")

    with site.ws(sid, "alice") as ws:
        frame = json.loads(ws.recv(timeout=10))
        assert (frame["code"], frame.get("cause")) == ("auth_permission_denied", "https"), frame
        assert close_code(ws) == 4403
    assert not Run.objects.filter(session_id=sid).exists()

    # Behind the host's TLS proxy (SECURE_PROXY_SSL_HEADER), the same socket streams a send.
    with site.ws(sid, "alice", headers={"X-Forwarded-Proto": "https"}) as ws:
        ws.send(json.dumps(SEND))
        frames = ws_frames(ws)
        assert frames[0]["type"] == "run" and frames[-1] == {"type": "end", "status": "completed"}, frames[-3:]
