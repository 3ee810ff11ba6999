"""Owner recovery actions under hostile use: wrong run states, foreign runs, twin actions at the same instant."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helix_django.api.recovery import OWNER_ACTIONS
from helix_django.models import Run
from tests.adversarial.conftest import assert_typed_refusal, wait_idle
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_recovery_actions_never_500_and_twin_actions_make_at_most_one_run(daphne_server_factory, users):
    server = daphne_server_factory(helix=agent_settings(TEXT="A short answer here.", PACE_TPS=40))
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as a, httpx.Client(headers=users["b"][1], timeout=20) as b:
        live = read_sse(a, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=1)
        assert live.status == 200
        run = Run.objects.get(session_id=sid)
        base = f"{PREFIX}/sessions/{sid}/runs/{run.id}"
        # while live, and for another user, and for an unknown run: typed, never a 500
        for action in OWNER_ACTIONS:
            r = a.post(
                server.url(f"{base}/{action}"), content=b"[" * 3000, headers={"content-type": "application/json"}
            )
            assert r.status_code < 500, (action, r.status_code, r.text[:200])
            r = b.post(server.url(f"{base}/{action}"))
            assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
            r = a.post(server.url(f"{PREFIX}/sessions/{sid}/runs/run_nope/{action}"))
            assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
        wait_idle(a, server, sid)
        runs_before = Run.objects.filter(session_id=sid).count()
        barrier = threading.Barrier(3)

        def regenerate(_):
            with httpx.Client(headers=users["a"][1], timeout=20) as c:
                barrier.wait()
                return c.post(server.url(f"{base}/regenerate"))

        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(regenerate, range(3)))
        for r in results:
            assert r.status_code < 500, (r.status_code, r.text[:200])
            if r.status_code != 200:
                assert_typed_refusal(r.status_code, r.json(), statuses=(400, 409))
        new_runs = {r.json()["newRunId"] for r in results if r.status_code == 200 and r.json().get("newRunId")}
        assert len(new_runs) <= 1, new_runs
        assert Run.objects.filter(session_id=sid).count() <= runs_before + 1
