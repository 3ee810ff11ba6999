"""The AI SDK's own Chat tells the truth of a SIGKILL (issue 17): ``error`` when interrupted, ``ready`` when completed.

The real ``ai@6.0.326`` ``AbstractChat`` (the Chat behind every framework's ``useChat``) runs
under Node (tests/recovery/aisdk_chat_client.js) against a daphne server the test SIGKILLs
mid-answer. A Chat attached before the kill resumes after ``helix_recover`` from the cursor it
recorded, and a Chat attached only after the scan (holding the snapshot's messages) resumes from
the run's start: both end in ``error`` with the typed ``run_interrupted`` body (the chat route's
409 ``stream_failed`` for a failed stream) and show the partial text the server kept. A run
that finished before the kill ends ``ready`` with the full text, and a resume changes nothing.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from helix_django.models import Message
from tests.recovery.live_chat import REPLY, LiveChat, agent, user_token, wait_lease_expired
from tests.transport.test_aisdk_node import ai_package  # noqa: F401 - the session fixture installing ai@6

pytestmark = [pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

SCRIPT = Path(__file__).resolve().parent / "aisdk_chat_client.js"


def chat_process(ai_package: Path, server, chat: LiveChat, **args) -> subprocess.Popen:  # noqa: F811
    """Start the Node Chat on ``chat``'s session (``text`` to send, or ``cursor`` to resume from)."""
    payload = {"api": chat.url, "headers": chat.headers, "chatId": chat.session_id, **args}
    return subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        [shutil.which("node"), str(SCRIPT), json.dumps(payload)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AI_NODE_DIR": str(ai_package)},
    )


def report(process: subprocess.Popen) -> dict:
    """Read the Chat's next report line (``{phase, status, error, text, cursor}``)."""
    line = process.stdout.readline()
    assert line and "fatal" not in line, (line, process.stderr.read()[-2000:] if not line else "")
    return json.loads(line)


def resume(process: subprocess.Popen) -> dict:
    """Tell a Chat that reported ``sent`` to resume; return its last report."""
    process.stdin.write("resume\n")
    process.stdin.flush()
    out = report(process)
    assert process.wait(30) == 0
    return out


def test_the_ai_sdk_chat_ends_in_error_for_a_killed_run_and_ready_for_a_finished_one(
    daphne_server_factory,
    ai_package,  # noqa: F811
):
    server = daphne_server_factory(
        helix=agent({"TEXT": REPLY, "PACE_TPS": 15, "RULES": [{"MATCH": "^Quick", "PACE_TPS": 0}]})
    )
    headers = user_token()
    finished = LiveChat(server, headers)
    quick = chat_process(ai_package, server, finished, text="Quick question")
    sent = report(quick)
    assert (sent["status"], sent["error"], sent["text"]) == ("ready", None, REPLY)

    killed = LiveChat(server, headers)
    before = chat_process(ai_package, server, killed, text="A long question")
    killed.wait_for(lambda c: bool(c.persisted_text()))
    server.kill()
    cut = report(before)
    assert cut["status"] == "error" and REPLY.startswith(cut["text"])  # the connection died under it
    run = killed.run()
    wait_lease_expired(run)
    call_command("helix_recover", stdout=io.StringIO())
    server.start()

    partial = Message.objects.get(session_id=killed.session_id, position=1).text
    assert 0 < len(partial) < len(REPLY)
    run.refresh_from_db()
    snapshot = httpx.get(server.url(f"/helix/api/sessions/{killed.session_id}/snapshot"), headers=headers).json()
    after = chat_process(ai_package, server, killed, cursor=run.start_sequence, messages=snapshot["messages"])
    for out in (resume(before), report(after)):
        assert (out["status"], out["text"]) == ("error", partial), out
        assert json.loads(out["error"])["code"] == "run_interrupted"
    assert after.wait(30) == 0
    assert resume(quick) == {**sent, "phase": "resumed"}  # a finished run: nothing to resume, still ready
