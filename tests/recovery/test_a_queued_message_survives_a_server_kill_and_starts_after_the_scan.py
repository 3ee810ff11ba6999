"""A message queued behind a live answer survives a server SIGKILL and starts once the answer is ended.

The server is killed while the first answer streams and the follow-up waits in the queue
(multitask ``enqueue``). After the restart the relaunch scan ends the killed run
(``interrupted``, its partial kept) and that ending starts the waiting message as a send of
its own: nothing typed is lost, and it runs once.
"""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import Message, QueuedMessage, Run, RunStatus
from tests.recovery.live_chat import REPLY, LiveChat, agent, user_token, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def test_a_queued_message_starts_after_the_scan_ends_the_killed_answer(daphne_server_factory):
    helix = agent({"TEXT": REPLY, "PACE_TPS": 10})
    server = daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", helix=helix)
    headers = user_token()
    chat = LiveChat(server, headers)
    chat.send("first question", until=lambda c: len(c.text) > 10)
    first = chat.run()
    follow_up = {"id": "u_follow_up", "role": "user", "parts": [{"type": "text", "text": "and then?"}]}
    body = {"id": chat.session_id, "messages": [follow_up], "trigger": "submit-message"}
    with httpx.Client(timeout=10) as client:
        queued = client.post(chat.url, json=body, headers={**headers, "X-Helix-Multitask": "enqueue"})
    assert queued.status_code == 202, queued.text
    server.kill()
    assert Run.objects.get(pk=first.pk).is_live
    assert QueuedMessage.objects.get(session_id=chat.session_id).status == "queued"

    server.start()
    chat.resume(0, timeout=30)  # the new process's first call starts its scan
    wait_until(lambda: Run.objects.get(pk=first.pk).status == RunStatus.INTERRUPTED)
    started = wait_until(lambda: QueuedMessage.objects.filter(session_id=chat.session_id, status="started").first())
    follow_run = Run.objects.get(pk=started.run_id)
    wait_until(lambda: not Run.objects.get(pk=follow_run.pk).is_live, timeout=60)
    assert Run.objects.get(pk=follow_run.pk).status == RunStatus.COMPLETED
    assert Run.objects.filter(session_id=chat.session_id).count() == 2
    users = Message.objects.filter(session_id=chat.session_id, role="user", position__isnull=False)
    assert [m.ui_id for m in users.order_by("position")][-1] == "u_follow_up"
    assert users.filter(ui_id="u_follow_up").count() == 1
