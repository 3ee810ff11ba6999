"""The admin's recovery actions end a live run at once on a host with ``ATOMIC_REQUESTS = True``.

Seen on a live host site: the admin's **Cancel** (and **Mark interrupted**) on a streaming
run took 15 s and the run was still ``streaming`` right after. The action ran inside the
request's transaction, holding the database's write lock, and the run's own ending waited
for that lock. The admin views that perform recovery actions (one run's, the changelist's
bulk actions, a tool's resolution) run outside the request transactions, as helix's REST
views do. (Mark interrupted of a run executed in this process did not wait before either:
its case guards it.) The admin's request runs in a thread of its own, as a server's would.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.testing import HttpCommunicator
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from django.urls import reverse

from helix_django.models import Run, RunStatus
from helix_django.recovery import inventory as inv
from tests.host.conftest import HOST, new_session_id, send_body
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]

JSON = (b"content-type", b"application/json")
ENDED = {inv.CANCEL: RunStatus.CANCELLED, inv.MARK_INTERRUPTED: RunStatus.INTERRUPTED}


@pytest.fixture
def atomic_requests(monkeypatch):
    """The host wraps every view in a transaction of each of its databases (Django's ATOMIC_REQUESTS)."""
    for alias in connections:
        monkeypatch.setitem(connections[alias].settings_dict, "ATOMIC_REQUESTS", True)


@pytest.fixture
def admin_client(transactional_db):
    """A browser signed in to the admin as a superuser of the host's user model."""
    user = get_user_model().objects.create_superuser(email=f"ops-{uuid.uuid4().hex[:6]}@host.example", password="pw")
    client = Client()
    client.force_login(user)
    return client


async def start_a_streaming_run(sid: str, auth: tuple[bytes, bytes]) -> tuple[HttpCommunicator, Run]:
    """Send a slow reply through the host's ASGI app; return once its first text delta arrived."""
    from tests.host.asgi import application

    send = HttpCommunicator(
        application, "POST", f"/helix/api/sessions/{sid}/chat", body=send_body(sid), headers=[HOST, auth, JSON]
    )
    await send.send_input({"type": "http.request", "body": send_body(sid), "more_body": False})
    body = b""
    while b"text-delta" not in body:
        body += (await send.receive_output(10)).get("body", b"")
    run = await Run.objects.filter(session_id=sid).order_by("-created_at").afirst()
    assert run.status == RunStatus.STREAMING
    return send, run


async def read_to_the_end(send: HttpCommunicator) -> None:
    while (await send.receive_output(10)).get("more_body"):
        pass


@pytest.mark.parametrize("action", [inv.CANCEL, inv.MARK_INTERRUPTED])
async def test_one_runs_action_ends_the_live_run_before_it_answers(
    settings, atomic_requests, jwt_user, admin_client, action
):
    settings.HELIX = {**settings.HELIX, **agent_settings(TEXT=" ".join(f"w{i}" for i in range(400)), PACE_TPS=50)}
    sid = new_session_id()
    send, run = await start_a_streaming_run(sid, jwt_user[1])
    url = reverse("admin:helix_django_run_recovery", args=[quote(run.pk), action])

    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = await asyncio.to_thread(admin_client.post, url, HTTP_HOST="api.example")
    waited = loop.time() - started

    assert answer.status_code == 302, answer.content[:300]
    assert (await Run.objects.aget(pk=run.pk)).status == ENDED[action]
    assert waited < 5, waited  # the run ended at once, not after the database's lock timeout (15 s before)
    await read_to_the_end(send)


async def test_a_bulk_action_ends_the_live_run_before_it_answers(settings, atomic_requests, jwt_user, admin_client):
    settings.HELIX = {**settings.HELIX, **agent_settings(TEXT=" ".join(f"w{i}" for i in range(400)), PACE_TPS=50)}
    sid = new_session_id()
    send, run = await start_a_streaming_run(sid, jwt_user[1])
    data = {"action": f"recovery_{inv.CANCEL}", "_selected_action": [run.pk], "confirm": "yes"}

    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = await asyncio.to_thread(
        admin_client.post, reverse("admin:helix_django_run_changelist"), data, HTTP_HOST="api.example"
    )
    waited = loop.time() - started

    assert answer.status_code == 302, answer.content[:300]
    assert (await Run.objects.aget(pk=run.pk)).status == RunStatus.CANCELLED
    assert waited < 5, waited
    await read_to_the_end(send)
