"""A Regenerate after a server SIGKILL keeps the email the killed run sent; the reworded call never goes out.

The killed run sent ``send_email`` (a real execution, written to the outbox file by the
server process) and was waiting on the model for its final text. After the restart its
first scan interrupts it; a Regenerate through the chat route (the AI SDK's
``regenerate()``) starts from the last safe checkpoint (000, "Keep a last-safe context
checkpoint"): the new attempt's model is told of the sent email and the email is sent once.
"""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import Run, RunStatus, ToolExecution
from tests.recovery.live_chat import LiveChat, agent, user_token, wait_until
from tests.runtime import effects

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

STEPS = [
    {
        "TEXT": "Sending it. ",
        "TOOL_CALLS": [
            {"name": "send_email", "arguments": {"to": "ada@example.com", "subject": "Invoice 7", "body": "-"}}
        ],
    },
    {"TEXT": "The email is on its way to Ada."},
]


def test_a_chat_route_regenerate_after_a_kill_sends_the_email_once(daphne_server_factory, tmp_path, monkeypatch):
    monkeypatch.setenv(effects.OUTBOX_ENV, str(tmp_path / "outbox.jsonl"))
    monkeypatch.setenv(effects.MODEL_LOG_ENV, str(tmp_path / "model.jsonl"))
    helix = agent({"STEPS": STEPS, "OWN_EFFECT": {"HANG_AFTER_CHUNKS": 2}}, tools=[f"{effects.PATH}.send_email"])
    helix["AGENTS"]["default"]["PROVIDER"]["BACKEND"] = f"{effects.PATH}.RewordingProvider"
    server = daphne_server_factory(
        asgi_app="tests.recovery.asgi_recovering:application",
        helix={**helix, "LEASE_SECONDS": 120},
        env={effects.OUTBOX_ENV: str(tmp_path / "outbox.jsonl"), effects.MODEL_LOG_ENV: str(tmp_path / "model.jsonl")},
    )
    headers = user_token()
    chat = LiveChat(server, headers)
    chat.send("Email Ada invoice 7", message_id="u_turn_7", until=lambda c: "The email" in c.text)
    first = chat.run()
    wait_until(lambda: ToolExecution.objects.filter(run=first, status="succeeded").exists())
    server.kill()
    assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}"]

    server.start()
    chat.resume(0, timeout=30)  # the new process's first call starts its scan
    wait_until(lambda: Run.objects.get(pk=first.pk).status == RunStatus.INTERRUPTED)
    turn = {"id": "u_turn_7", "role": "user", "parts": [{"type": "text", "text": "Email Ada invoice 7"}]}
    body = {"id": chat.session_id, "messages": [turn], "trigger": "regenerate-message"}
    with httpx.Client(timeout=30) as client, client.stream("POST", chat.url, json=body, headers=headers) as response:
        assert response.status_code == 200  # the body is not read: the run is watched in the database
    new = wait_until(lambda: Run.objects.filter(session_id=chat.session_id).exclude(pk=first.pk).first())
    wait_until(lambda: len(effects.sent()) > 1 or not Run.objects.get(pk=new.pk).is_live)
    assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}"]
    assert Run.objects.get(pk=new.pk).status == RunStatus.COMPLETED
    calls = [entry for entry in effects.model_log() if entry["run"] == new.pk]
    assert calls and effects.told_of(calls[0]["messages"], first.pk)
