"""Anonymous chats belong to a random owner token helix keeps inside the visitor's Django session.

Seen on a live host site with ``ALLOW_ANONYMOUS``: under the ``signed_cookies`` session
engine the session key is the cookie itself (its payload and a timestamp in seconds), so two
visitors whose first sends fell in the same second got the same cookie and read each other's
chats; a host page that wrote to the session signed the cookie again and the visitor lost
every chat; on PostgreSQL the 83-character key did not fit ``anonymous_key`` and every
anonymous send answered a "retryable" ``503``. The owner token survives all of these, and a
new session key (``cycle_key``, as ``login()`` does) too.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from django.conf import settings

from helix_django.models import ChatSession
from tests.host.sites import PREFIX, close_code, new_session_id, user_message, ws_frames

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def first_send(site, browser: httpx.Client, session_id: str, text: str) -> httpx.Response:
    """The visitor's first send: no session yet, so no CSRF token is needed."""
    body = {"id": session_id, "messages": [user_message(text)]}
    return browser.post(site.url(f"{PREFIX}/sessions/{session_id}/chat"), json=body)


def snapshot_status(site, browser: httpx.Client, session_id: str) -> int:
    return browser.get(site.url(f"{PREFIX}/sessions/{session_id}/snapshot")).status_code


def listed(site, browser: httpx.Client) -> list[str]:
    response = browser.get(site.url(f"{PREFIX}/sessions/"))
    assert response.status_code == 200, response.text
    return [session["id"] for session in response.json()["results"]]


def at_the_start_of_a_second() -> None:
    """Sleep until just after the wall clock's next whole second (a signed cookie's timestamp unit)."""
    time.sleep(1.02 - time.time() % 1)


@pytest.mark.parametrize("profile", ["signed_cookies", "anonymous"])
def test_two_visitors_whose_first_sends_share_a_second_never_see_each_others_chats(host_site, profile):
    site = host_site(profile)
    ids = {"a": new_session_id(), "b": new_session_id()}
    answers: dict[str, httpx.Response] = {}
    with httpx.Client(timeout=30) as a, httpx.Client(timeout=30) as b:
        browsers = {"a": a, "b": b}
        at_the_start_of_a_second()
        threads = [
            threading.Thread(target=lambda n=name: answers.__setitem__(n, first_send(site, browsers[n], ids[n], n)))
            for name in ("a", "b")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name in ("a", "b"):
            assert answers[name].status_code == 200, answers[name].text
            assert answers[name].text.rstrip().endswith("data: [DONE]"), answers[name].text[-300:]
        assert a.cookies[settings.SESSION_COOKIE_NAME] != b.cookies[settings.SESSION_COOKIE_NAME]

        assert snapshot_status(site, a, ids["a"]) == 200
        assert snapshot_status(site, b, ids["b"]) == 200
        assert snapshot_status(site, b, ids["a"]) == 404
        assert snapshot_status(site, a, ids["b"]) == 404
        assert listed(site, a) == [ids["a"]] and listed(site, b) == [ids["b"]]
    keys = set(ChatSession.objects.filter(pk__in=ids.values()).values_list("anonymous_key", flat=True))
    assert len(keys) == 2 and all(0 < len(key) <= 64 for key in keys)


@pytest.mark.parametrize(
    ("profile", "host_page"),
    [("signed_cookies", "/host/remember/"), ("anonymous", "/host/remember/"), ("anonymous", "/host/rotate/")],
    ids=["signed-cookie-written", "db-session-written", "db-session-new-key"],
)
def test_a_visitor_keeps_their_chats_when_the_host_writes_to_or_rotates_their_session(host_site, profile, host_page):
    site = host_site(profile)
    sid = new_session_id()
    with httpx.Client(timeout=30) as visitor:
        sent = first_send(site, visitor, sid, "remember me")
        assert sent.status_code == 200, sent.text
        before = visitor.cookies[settings.SESSION_COOKIE_NAME]

        assert visitor.get(site.url(host_page)).status_code == 200
        time.sleep(1.1)  # a signed cookie written a second later differs even with the same data
        assert visitor.get(site.url("/host/remember/")).status_code == 200
        assert visitor.cookies[settings.SESSION_COOKIE_NAME] != before or profile == "anonymous"
        if host_page == "/host/rotate/":
            assert visitor.cookies[settings.SESSION_COOKIE_NAME] != before

        assert listed(site, visitor) == [sid]
        assert snapshot_status(site, visitor, sid) == 200
    with httpx.Client(timeout=30) as stranger:
        assert snapshot_status(site, stranger, sid) in (401, 404)


@pytest.mark.parametrize("profile", ["anonymous", "signed_cookies"])
def test_the_visitors_websocket_reads_their_chat_and_a_strangers_is_refused(host_site, profile):
    site = host_site(profile)
    sid = new_session_id()
    with httpx.Client(timeout=30) as visitor:
        assert first_send(site, visitor, sid, "over the socket").status_code == 200
        cookie = f"{settings.SESSION_COOKIE_NAME}={visitor.cookies[settings.SESSION_COOKIE_NAME]}"
    with site.ws(sid, headers={"Cookie": cookie, "Origin": site.url("")}) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        assert ws_frames(ws)[-1] == {"type": "end", "status": "completed"}
    with httpx.Client(timeout=30) as stranger:
        other = new_session_id()
        assert first_send(site, stranger, other, "mine").status_code == 200
        cookie = f"{settings.SESSION_COOKIE_NAME}={stranger.cookies[settings.SESSION_COOKIE_NAME]}"
    with site.ws(sid, headers={"Cookie": cookie, "Origin": site.url("")}) as ws:
        assert ws_frames(ws)[-1]["code"] == "state_session_not_found"
        assert close_code(ws) == 4404
