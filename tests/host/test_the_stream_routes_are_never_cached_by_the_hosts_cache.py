"""The chat, AI SDK and raw stream routes are never served from the host's site-wide cache.

Seen on a live host site with ``UpdateCacheMiddleware`` ... ``FetchFromCacheMiddleware``
(600 s): the second GET of the raw stream route, of the chat resume and of the AI SDK
resume answered ``500 framework_internal_error`` for the cache's lifetime (the middleware
stored the route's internal placeholder and served it back), and the first SSE response
carried two ``Cache-Control`` headers.
"""

from __future__ import annotations

import pytest

from tests.host.sites import PREFIX, new_session_id
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120), pytest.mark.slow]

SHORT = agent_settings(TEXT="one two three", PACE_TPS=0)


def _never_cached(response) -> None:
    values = response.headers.get_list("cache-control")
    assert len(values) == 1 and "no-store" in values[0], (response.request.url, values)


def test_every_stream_route_answers_each_get_live_and_never_cached(host_site):
    site = host_site("cache_middleware", helix=SHORT)
    sid = new_session_id()
    sent = site.send(sid, "alice", text="first")
    assert sent.status_code == 200, sent.text
    _never_cached(sent)
    assert '"delta":"three"' in sent.text or "three" in sent.text, sent.text[-300:]

    routes = [f"{PREFIX}/sessions/{sid}/chat", f"{PREFIX}/chat/{sid}/stream", f"{PREFIX}/sessions/{sid}/stream"]
    for path in routes:
        for attempt in (1, 2):
            response = site.request("GET", path, "alice")
            assert response.status_code in (200, 204), (path, attempt, response.status_code, response.text[:300])
            _never_cached(response)

    second = site.send(sid, "alice", text="second")
    assert second.status_code == 200, second.text
    raw = site.request("GET", f"{PREFIX}/sessions/{sid}/stream", "alice")
    assert raw.text.count('"type":"text-start"') == 2, raw.text[-500:]  # both turns, not the cached first

    refused = site.request("GET", f"{PREFIX}/sessions/{sid}/stream", "bob")
    assert refused.status_code == 404, refused.text
    _never_cached(refused)
