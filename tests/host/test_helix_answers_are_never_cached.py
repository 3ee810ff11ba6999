"""Helix's REST answers are live state: ``Cache-Control: no-store`` on each, whatever cache the host runs.

A live host site with Django's site-wide cache (``UpdateCacheMiddleware`` first,
``FetchFromCacheMiddleware`` last, ``CACHE_MIDDLEWARE_SECONDS = 600``) served the first
turn's snapshot after a second turn, the runs list of before a new run, and (a JWT is not
in the cache key) one user's answer to another. Every JSON answer of helix's REST views
carries Django's ``never_cache`` headers, in exactly one ``Cache-Control`` header.
"""

from __future__ import annotations

import pytest

from tests.host.sites import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def assert_never_cached(response) -> None:
    """One ``Cache-Control`` header, with ``no-store`` and ``max-age=0``."""
    values = response.headers.get_list("cache-control")
    assert len(values) == 1, (response.request.url, values)
    directives = {part.strip() for part in values[0].split(",")}
    assert {"no-store", "no-cache", "must-revalidate", "max-age=0"} <= directives, (response.request.url, values)


def test_the_snapshot_and_the_runs_list_show_the_second_turn_under_the_hosts_cache_middleware(host_site):
    site = host_site("cache_middleware")
    sid = new_session_id()
    snapshot, runs = f"{PREFIX}/sessions/{sid}/snapshot", f"{PREFIX}/sessions/{sid}/runs/"

    assert site.send(sid, "alice", "first").status_code == 200
    first = site.request("GET", snapshot, "alice")
    assert first.status_code == 200 and len(first.json()["messages"]) == 2
    assert len(site.request("GET", runs, "alice").json()["results"]) == 1

    assert site.send(sid, "alice", "second").status_code == 200
    second = site.request("GET", snapshot, "alice")
    assert second.status_code == 200
    assert [m["role"] for m in second.json()["messages"]] == ["user", "assistant", "user", "assistant"]
    assert_never_cached(second)
    listed = site.request("GET", runs, "alice")
    assert listed.json()["count"] == 2
    assert_never_cached(listed)


def test_every_rest_answer_is_no_store_and_never_served_to_another_user(host_site):
    site = host_site("cache_middleware")
    sid = new_session_id()
    assert site.send(sid, "alice").status_code == 200
    run_id = site.request("GET", f"{PREFIX}/sessions/{sid}/runs/", "alice").json()["results"][0]["id"]
    paths = [
        f"{PREFIX}/sessions/",
        f"{PREFIX}/sessions/{sid}/",
        f"{PREFIX}/sessions/{sid}/snapshot",
        f"{PREFIX}/sessions/{sid}/runs/",
        f"{PREFIX}/sessions/{sid}/runs/{run_id}/recovery",
    ]
    for path in paths:
        answer = site.request("GET", path, "alice")
        assert answer.status_code == 200, (path, answer.text)
        assert_never_cached(answer)
    for path in paths[1:]:
        stranger = site.request("GET", path, "bob")
        assert stranger.status_code == 404, (path, stranger.text)
        assert stranger.json()["code"] == "state_session_not_found"
        assert_never_cached(stranger)
    assert site.request("GET", paths[0], "bob").json()["results"] == []
    created = site.request("POST", f"{PREFIX}/sessions/", "alice", json={"id": new_session_id()})
    assert created.status_code == 201
    assert_never_cached(created)
    assert_never_cached(site.request("GET", f"{PREFIX}/sessions/", None))  # a typed 401
