"""Every helix surface obeys the host's settings, profile by profile, for the owner and for a stranger.

For each host profile (:mod:`tests.host.profiles`) one live site is walked on every surface
(:mod:`tests.host.surfaces`, :mod:`tests.host.admin_pages`): the chat route, the AI SDK
routes, the raw stream route, the WebSocket, the REST and recovery views, the schema and the
admin. The owner (alice; staff under ``admin_only``; an anonymous browser under
``ALLOW_ANONYMOUS``) sends on each send surface, reads everything before and after her later
turns (a second GET is live, never a cached first) and posts every write. Bob (and, under
``ALLOW_ANONYMOUS``, a stranger's browser) walks the same surfaces on her session, tries to
delete and claim it, and is answered as on an unknown session: 404 (close 4404) where the
host lets him in, its policy's 403 where it does not; nothing of hers changes. Every answer
is well formed (never a 5xx, typed refusals, one ``no-store`` ``Cache-Control``, helix's own
JSON with ISO 8601 timestamps), a ``PUT`` anywhere is a typed refusal, and the profile's own
rule holds on every surface. Staff read every helix admin page; a user without an admin
session is sent to its login.
"""

from __future__ import annotations

import httpx
import pytest
from django.utils.crypto import get_random_string

from helix_django.models import ChatSession, Run
from tests.host.admin_pages import admin_answers, staff_admin
from tests.host.sites import new_session_id
from tests.host.surfaces import Actor, Answer, assert_well_formed, claims, reads, send, walk, wrong_methods
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

SHORT = agent_settings(TEXT="a short answer", PACE_TPS=0)
PROFILES = [
    "plain",
    "admin_only",
    "user_throttle",
    "ssl_redirect",
    "signed_cookies",
    "anonymous",
    "cache_middleware",
    "root_path",
    "model_permissions",
    "envelope_renderer",
    "form_parsers",
    "datetime_format",
    "no_tz",
    "force_script_name",
]
ANONYMOUS = ("signed_cookies", "anonymous")
HTTPS = {"X-Forwarded-Proto": "https"}
SESSION_SURFACES = ("chat resume", "ai sdk reconnect", "raw stream", "session", "snapshot", "runs", "recovery")
SENDS = ("chat send", "ai sdk send", "ws send")
WRITES = (
    "chat send",
    "ai sdk send",
    "cancel",
    "tool-results",
    "regenerate",
    "continue",
    "keep",
    "discard",
    "delete it",
)
STRANGER_SURFACES = (
    *SESSION_SURFACES,
    *("chat resume, no cursor", "cancel", "tool-results", "regenerate", "continue", "keep", "discard"),
    *("ws resume", "ws cancel", "delete it"),
)


def by_surface(answers: list[Answer]) -> dict[str, Answer]:
    return {answer.surface: answer for answer in answers}


def anonymous_browser(site) -> Actor:
    """A visitor's browser, with the CSRF cookie any page of the host with a form sets."""
    browser = httpx.Client(timeout=30)
    browser.cookies["csrftoken"] = get_random_string(32)
    return Actor(site, client=browser)


def owner_of(site, profile: str) -> Actor:
    """Who owns the walked session: an anonymous browser, staff, or alice (holding helix's permissions)."""
    headers = HTTPS if profile == "ssl_redirect" else {}
    if profile in ANONYMOUS:
        return anonymous_browser(site)
    if profile == "model_permissions":
        from django.contrib.auth.models import Permission

        helix_permissions = Permission.objects.filter(content_type__app_label="helix_django")
        site.users["alice"].user.user_permissions.set(helix_permissions)
    return Actor(site, "staff" if profile == "admin_only" else "alice", headers=headers)


def assert_streamed(answer: Answer) -> None:
    """A send or a resume from 0 that streamed a whole run to its ``[DONE]`` (or the socket's ``end``)."""
    where = (answer.surface, answer.status, answer.body if answer.headers else answer.frames[-3:])
    assert answer.status == 200, where
    if answer.headers is None:
        assert answer.frames[-1] == {"type": "end", "status": "completed"}, where
    else:
        assert answer.headers["content-type"].startswith("text/event-stream"), where
        assert answer.body.rstrip().endswith("data: [DONE]"), where


def assert_owner_reads(answers: dict[str, Answer], session_id: str, turns: int) -> None:
    """What the owner reads after ``turns`` runs: each GET shows them all, live."""
    assert_streamed(answers["chat resume"])
    assert answers["chat resume, no cursor"].status == 204, answers["chat resume, no cursor"]
    assert answers["ai sdk reconnect"].status == 204, answers["ai sdk reconnect"]
    raw = answers["raw stream"]
    assert raw.status == 200 and raw.body.count('"type":"text-start"') == turns, (raw.status, raw.body[-400:])
    assert answers["session"].status == 200 and answers["session"].body["id"] == session_id, answers["session"]
    snapshot = answers["snapshot"]
    assert snapshot.status == 200 and len(snapshot.body["messages"]) == 2 * turns, snapshot
    runs = answers["runs"].body
    assert answers["runs"].status == 200 and runs["count"] == turns, answers["runs"]
    assert answers["recovery"].status == 200 and answers["recovery"].body["runId"], answers["recovery"]
    assert answers["ws resume"].frames[-1] == {"type": "end", "status": "completed"}, answers["ws resume"].frames[-3:]


def assert_owner_writes(answers: dict[str, Answer], session_id: str) -> None:
    """The owner's writes on an ended run are answered (or refused typed, as an ended run is), and her lists."""
    assert answers["cancel"].status in (200, 409), answers["cancel"]
    assert answers["tool-results"].status in (400, 409), answers["tool-results"]
    for action in ("regenerate", "continue", "keep", "discard"):
        assert answers[action].status == 409, answers[action]
        assert answers[action].code == "state_run_not_actionable", answers[action]
    assert answers["ws cancel"].frames[-1]["type"] in ("cancelled", "error"), answers["ws cancel"].frames
    listed = answers["sessions"]
    assert listed.status == 200 and session_id in [s["id"] for s in listed.body["results"]], listed
    assert answers["create"].status == 201, answers["create"]
    assert answers["delete"].status == 204, answers["delete"]
    assert answers["schema"].status == 200 and "paths" in answers["schema"].body, answers["schema"].status


def assert_refused_alike(answers: list[Answer], status: int, code: str) -> None:
    """Every answer but the public schema is the typed refusal ``status`` / ``code`` (the socket's close ``4000+``)."""
    for answer in answers:
        if answer.surface == "schema":
            continue
        where = (answer.surface, answer.status, answer.body if answer.headers else answer.frames)
        assert (answer.status, answer.code) == (status, code), where
        if answer.headers is None:
            assert answer.close == 4000 + status, where


def assert_wrong_methods_refused(owner: Actor, bob: Actor, session_id: str, run_id: str) -> None:
    """A ``PUT`` on every route is a typed 405 or the policy's refusal, and bob's on her session as on none."""
    for answer in wrong_methods(owner, session_id, run_id):
        assert_well_formed(answer)
        assert answer.status in (403, 405, 429), answer
    unknown = new_session_id()
    for mine, none in zip(wrong_methods(bob, session_id, run_id), wrong_methods(bob, unknown, run_id), strict=True):
        assert_well_formed(mine)
        assert (mine.status, mine.code) == (none.status, none.code) or 429 in (mine.status, none.status), (mine, none)


def walk_as_stranger(site, profile: str, bob: Actor, session_id: str, run_id: str) -> None:
    """A stranger (bob) on alice's session is answered as on a session that does not exist, and changes nothing."""
    runs_before = Run.objects.filter(session_id=session_id).count()
    sends = [send(bob, surface, session_id, "not mine") for surface in SENDS]
    theirs = by_surface([*sends, *walk(bob, session_id, run_id), *claims(bob, session_id)])
    unknown = by_surface([*walk(bob, new_session_id(), run_id), *claims(bob, new_session_id())[:1]])
    for answer in [*theirs.values(), *unknown.values()]:
        assert_well_formed(answer)
    assert Run.objects.filter(session_id=session_id).count() == runs_before
    if profile == "user_throttle":
        assert_throttled_once_over([*theirs.values(), *unknown.values()])
        return
    for surface in STRANGER_SURFACES:
        mine, none = theirs[surface], unknown[surface]
        assert (mine.status, mine.code) == (none.status, none.code), (surface, mine, none)
    if profile == "admin_only":
        assert_refused_alike(list(theirs.values()), 403, "auth_permission_denied")
    else:
        # DjangoModelPermissions admits a GET (and the socket's handshake) to all, a POST to holders only.
        forbidden = WRITES if profile == "model_permissions" else ()
        assert_refused_alike([theirs[s] for s in forbidden], 403, "auth_permission_denied")
        assert_refused_alike([theirs["raw stream"]], 404, "stream_not_found")  # docs/transport.md, "Wire errors"
        refused = [s for s in (*STRANGER_SURFACES, *SENDS) if s not in (*forbidden, "ai sdk reconnect", "raw stream")]
        assert_refused_alike([theirs[s] for s in refused], 404, "state_session_not_found")
        assert session_id not in [s["id"] for s in theirs["sessions"].body["results"]]
        assert 400 <= theirs["claim"].status < 500, theirs["claim"]
    assert ChatSession.objects.filter(pk=session_id).exists()


def assert_throttled_once_over(answers: list[Answer], limit: int = 4) -> None:
    """At most ``limit`` answers are admitted; every one after the first 429 is a typed 429 too."""
    statuses = [answer.status for answer in answers]
    assert 429 in statuses, statuses
    first = statuses.index(429)
    assert first <= limit and set(statuses[first:]) == {429}, statuses
    for answer in answers[first:]:
        assert answer.code == "rate_limited", answer


@pytest.mark.parametrize("profile", PROFILES)
def test_every_surface_obeys_the_hosts_profile(host_site, profile):
    site = host_site(profile, root="/app" if profile == "root_path" else "", helix=SHORT)
    owner = owner_of(site, profile)
    sid = new_session_id()
    answers = [send(owner, "chat send", sid, "one")]
    run_id = Run.objects.filter(session_id=sid).values_list("id", flat=True).first() or "run_none"
    answers += reads(owner, sid, run_id)
    answers += [send(owner, surface, sid, text) for surface, text in (("ai sdk send", "two"), ("ws send", "three"))]
    answers += walk(owner, sid, run_id)
    for answer in answers:
        assert_well_formed(answer)

    if profile == "user_throttle":
        assert_throttled_once_over(answers)
    else:
        first, later = by_surface(answers[:10]), by_surface(answers[10:])
        for answer in (first["chat send"], later["ai sdk send"], later["ws send"]):
            assert_streamed(answer)
        assert_owner_reads(first, sid, turns=1)
        assert_owner_reads(later, sid, turns=3)
        assert_owner_writes(later, sid)
    if profile == "admin_only":
        alice = Actor(site, "alice")
        refused = [send(alice, "chat send", sid, "no"), *walk(alice, sid, run_id)]
        for answer in refused:
            assert_well_formed(answer)
        assert_refused_alike(refused, 403, "auth_permission_denied")
    if profile == "ssl_redirect":
        cleartext = Actor(site, "alice")
        plain = [send(cleartext, "chat send", sid, "no"), *walk(cleartext, sid, run_id)]
        for answer in plain:
            assert_well_formed(answer, redirects=True)
            if answer.headers is None:
                assert (answer.close, answer.frames[-1].get("cause")) == (4403, "https"), answer
            else:
                assert answer.status == 301, answer
    assert_wrong_methods_refused(owner, Actor(site, "bob", headers=owner.headers), sid, run_id)
    walk_as_stranger(site, profile, Actor(site, "bob", headers=owner.headers), sid, run_id)
    if profile in ANONYMOUS:
        walk_as_stranger(site, profile, anonymous_browser(site), sid, run_id)
    walk_the_admin(site, profile, owner, sid, run_id)


def walk_the_admin(site, profile: str, owner: Actor, session_id: str, run_id: str) -> None:
    """Staff read every helix admin page; a user with no admin session is sent to its login; https as the API."""
    pages = admin_answers(site, staff_admin(site, owner.headers), session_id, run_id)
    for page in pages:
        assert page.status == 200, (page.surface, page.status, page.headers.get("location"), page.body[-300:])
        values = page.headers.get_list("cache-control")
        assert len(values) == 1 and "no-store" in values[0], (page.surface, values)
    with httpx.Client(timeout=30, headers={**owner.headers, **site.users["alice"].headers}) as alice:
        for page in admin_answers(site, alice, session_id, run_id):
            assert page.status == 302 and "/admin/login/" in page.headers["location"], (page.surface, page.status)
    if profile == "ssl_redirect":
        with httpx.Client(timeout=30) as cleartext:
            for page in admin_answers(site, cleartext, session_id, run_id):
                assert page.status == 301 and page.headers["location"].startswith("https://"), page.surface
