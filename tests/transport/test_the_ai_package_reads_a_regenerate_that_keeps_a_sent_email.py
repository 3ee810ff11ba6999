"""The real ``ai`` package (ai@6.0.326) reads a Regenerate whose new answer opens with the email already sent.

The first run sends ``send_email`` and fails before its final text; the AI SDK's transport
then regenerates (``trigger: "regenerate-message"``). ``readUIMessageStream`` builds the new
answer from the stream: the kept ``send_email`` call with the first run's result, then the
final text, as the snapshot holds it; the email went out once.
"""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Run
from tests.runtime import effects
from tests.transport.conftest import agent_settings, chat_url, new_session_id, read_sse, send_body, user_message
from tests.transport.test_aisdk_node import ai_package, run_client, snapshot_message  # noqa: F401

pytestmark = [pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

STEPS = [
    {
        "TEXT": "Sending it. ",
        "TOOL_CALLS": [
            {"name": "send_email", "arguments": {"to": "ada@example.com", "subject": "Invoice 7", "body": "-"}}
        ],
    },
    {"TEXT": "The email is on its way to Ada."},
]


def wait_not_live(session_id: str) -> Run:
    """Return the session's latest run once it has ended."""
    for _ in range(300):
        run = Run.objects.filter(session_id=session_id).order_by("-created_at").first()
        if run is not None and not run.is_live:
            return run
        time.sleep(0.05)
    raise AssertionError("the run did not end")


def test_the_ai_package_reads_the_kept_email_and_the_new_text(
    daphne_server_factory,
    users,
    ai_package,  # noqa: F811 - the session fixture
    tmp_path,
    monkeypatch,
):
    outbox = str(tmp_path / "outbox.jsonl")
    monkeypatch.setenv(effects.OUTBOX_ENV, outbox)
    helix = agent_settings()
    helix["AGENTS"]["default"]["PROVIDER"] = {
        "BACKEND": f"{effects.PATH}.RewordingProvider",
        "OPTIONS": {"STEPS": STEPS, "OWN_EFFECT": {"FAIL_AFTER_CHUNKS": 2}},
    }
    helix["AGENTS"]["default"]["TOOLS"] = [f"{effects.PATH}.send_email"]
    server = daphne_server_factory(helix=helix, env={effects.OUTBOX_ENV: outbox})
    headers = users["a"][1]
    sid, turn = new_session_id(), user_message("Email Ada invoice 7")
    with httpx.Client(headers=headers, timeout=10) as client:
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [turn]))
        first = wait_not_live(sid)
        assert first.status == "failed"
        out = run_client(
            ai_package,
            mode="regenerate",
            api=chat_url(server, sid),
            headers=headers,
            chatId=sid,
            messages=[turn],
            messageId=first.response_message_id,
        )
        new = wait_not_live(sid)
        assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}"]
        assert new.status == "completed"
        expected = snapshot_message(client, server, sid, out["message"]["id"])
    assert out["error"] is None
    email = next(p for p in out["message"]["parts"] if p["type"] == "tool-send_email")
    assert email["state"] == "output-available" and email["output"]["body"] == f"Sent by {first.pk}"
    text = "".join(p.get("text", "") for p in out["message"]["parts"] if p["type"] == "text")
    assert text == "The email is on its way to Ada."
    assert [p for p in out["message"]["parts"] if not p["type"].startswith("data-")] == [
        p for p in expected["parts"] if not p["type"].startswith("data-")
    ]
