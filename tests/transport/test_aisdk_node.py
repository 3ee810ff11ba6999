"""The UI message stream parsed by the real ``ai`` npm package (ai@6.0.326, readUIMessageStream)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from helix_django.models import Message
from tests.transport.conftest import (
    PREFIX,
    REPLY,
    TWO_STEPS,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    snapshot_after_first_step,
    user_message,
)

pytestmark = [pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AI_VERSION = "6.0.326"
NODE_DIR = Path(__file__).resolve().parent.parent / ".node"
SCRIPT = Path(__file__).resolve().parent / "aisdk_client.js"


@pytest.fixture(scope="session")
def ai_package() -> Path:
    """Install ``ai@6.0.326`` into the git-ignored tests/.node once (npm registry)."""
    package = NODE_DIR / "node_modules" / "ai" / "package.json"
    if not package.exists() or json.loads(package.read_text())["version"] != AI_VERSION:
        NODE_DIR.mkdir(exist_ok=True)
        npm = shutil.which("npm")
        assert npm, "npm is required for the AI SDK compatibility tests"
        subprocess.run(  # noqa: S603
            [npm, "install", "--prefix", str(NODE_DIR), f"ai@{AI_VERSION}", "--no-audit", "--no-fund"],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return NODE_DIR


def run_client(ai_package: Path, **args) -> dict:
    node = shutil.which("node")
    done = subprocess.run(  # noqa: S603
        [node, str(SCRIPT), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AI_NODE_DIR": str(ai_package)},
    )
    out = json.loads(done.stdout or "{}")
    assert done.returncode == 0 and "fatal" not in out, (done.stdout, done.stderr[-2000:])
    return out


def snapshot_message(client, server, session_id: str, message_id: str) -> dict:
    snap = client.get(server.url(f"{PREFIX}/sessions/{session_id}/snapshot")).json()
    return next(m for m in snap["messages"] if m["id"] == message_id)


def wait_ended(client, server, session_id):
    import time

    for _ in range(200):
        if client.get(server.url(f"{PREFIX}/sessions/{session_id}/snapshot")).json()["status"] == "ended":
            return
        time.sleep(0.05)
    raise AssertionError("run did not end")


def test_send_read_by_the_ai_package_equals_the_snapshot_message(daphne_server_factory, users, ai_package):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, REASONING="thinking it over", PACE_TPS=400))
    headers = users["a"][1]
    sid = new_session_id()
    out = run_client(
        ai_package, mode="send", api=chat_url(server, sid), headers=headers, chatId=sid, messages=[user_message("hi")]
    )
    assert out["error"] is None
    assert out["chunkTypes"][0] == "start" and out["chunkTypes"][-1] == "finish"
    with httpx.Client(headers=headers, timeout=10) as client:
        wait_ended(client, server, sid)
        expected = snapshot_message(client, server, sid, out["message"]["id"])
    assert out["message"] == expected
    assert "".join(p.get("text", "") for p in out["message"]["parts"] if p["type"] == "text") == REPLY


def test_replay_prefix_resume_read_by_the_ai_package_equals_the_snapshot_message(
    daphne_server_factory, users, ai_package
):
    server = daphne_server_factory(helix=agent_settings(tools=["lookup"], STEPS=TWO_STEPS, PACE_TPS=30))
    headers = users["a"][1]
    sid = new_session_id()
    with httpx.Client(headers=headers, timeout=10) as client:
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=8)
        snap = snapshot_after_first_step(client, server, sid)
        resume_headers = {
            "X-Resume-From-Sequence": str(snap["streamSequence"]),
            "X-Existing-Message-Id": snap["resumeMessageId"],
            "X-Helix-Replay-Prefix": "1",
        }
        out = run_client(
            ai_package,
            mode="resume",
            api=chat_url(server, sid),
            headers=headers,
            chatId=sid,
            resumeHeaders=resume_headers,
        )
        wait_ended(client, server, sid)
        expected = snapshot_message(client, server, sid, snap["resumeMessageId"])
    assert out["error"] is None
    assert out["chunkTypes"].count("start") == 1
    prefix_end = out["chunkTypes"].index("data-helix-replay", 2)
    assert "tool-output-available" in out["chunkTypes"][:prefix_end]  # the committed step 1
    assert "text-delta" in out["chunkTypes"][prefix_end:]  # the live tail
    assert out["message"] == expected
    assert Message.objects.filter(session_id=sid).count() == 2


def test_resume_of_a_finished_run_is_null_for_the_ai_package(daphne_server_factory, users, ai_package):
    server = daphne_server_factory(helix=agent_settings(TEXT="short answer", PACE_TPS=0))
    headers = users["a"][1]
    sid = new_session_id()
    with httpx.Client(headers=headers, timeout=10) as client:
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
        wait_ended(client, server, sid)
    out = run_client(ai_package, mode="resume", api=chat_url(server, sid), headers=headers, chatId=sid)
    assert out == {"message": None, "chunkTypes": []}
