"""A site served under a root path (``daphne --root-path /app`` behind a proxy that strips ``/app``).

Seen: once helix's routing was installed, every request of the site, the host's own pages
included, answered daphne's 500 (Channels' router refused a path that does not start with
the root path, although the ASGI server had already removed it).
"""

from __future__ import annotations

import json

import pytest

from tests.host.sites import PREFIX, new_session_id, user_message, ws_frames
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120), pytest.mark.slow]


def test_every_surface_answers_under_a_root_path(host_site):
    site = host_site("root_path", root="/app", helix=agent_settings(TEXT="under a root path", PACE_TPS=0))
    assert site.request("GET", f"{PREFIX}/host-status/").json() == {"host": "ok"}

    sid = new_session_id()
    sent = site.send(sid, "alice")
    assert sent.status_code == 200 and "[DONE]" in sent.text, sent.text[-300:]
    snapshot = site.request("GET", f"{PREFIX}/sessions/{sid}/snapshot", "alice")
    assert snapshot.status_code == 200 and len(snapshot.json()["messages"]) == 2, snapshot.text
    assert site.request("GET", f"{PREFIX}/sessions/{sid}/stream", "alice").status_code == 200
    assert site.request("GET", f"{PREFIX}/chat/{sid}/stream", "alice").status_code in (200, 204)

    schema = site.request("GET", f"{PREFIX}/schema/", "alice", headers={"Accept": "application/json"})
    assert schema.status_code == 200, schema.text[:300]
    assert all(path.startswith("/app/") for path in schema.json()["paths"]), list(schema.json()["paths"])[:3]

    with site.ws(sid, "alice") as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("again")]}))
        frames = ws_frames(ws)
        assert frames[0]["type"] == "run" and frames[-1] == {"type": "end", "status": "completed"}, frames[-2:]
