"""docs/aisdk.md's wiring, run with the real ``ai`` package (ai@6.0.326) against the example site.

tests/browser/aisdk_docs_client.js holds the page's code in plain JS: the fetch wrapper that
records SSE ids, ``prepareSendMessagesRequest`` with a request key, and
``prepareReconnectToStreamRequest`` that resumes from the snapshot's target. The transport's
own compatibility tests (tests/transport/test_aisdk_node.py) cover the chunk stream itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from helix_django.models import Message, Run, StreamChunk
from tests.browser.conftest import site_server
from tests.browser.pages import expected_reply
from tests.transport.conftest import read_sse, user_message
from tests.transport.test_aisdk_node import ai_package  # noqa: F401

pytestmark = [pytest.mark.node, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).resolve().parent / "aisdk_docs_client.js"


def run_docs_client(ai_dir: Path, **args) -> dict:
    done = subprocess.run(  # noqa: S603 - fixed argv
        [shutil.which("node"), str(SCRIPT), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "AI_NODE_DIR": str(ai_dir)},
        check=False,
    )
    out = json.loads(done.stdout or "{}")
    assert done.returncode == 0 and "fatal" not in out, (done.stdout, done.stderr[-2000:])
    return out


@pytest.fixture
def token_headers(transactional_db):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username="aisdk-docs", password="pw-not-secret")
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


def committed_assistant(session_id: str) -> dict:
    row = Message.objects.get(session_id=session_id, role="assistant", position__isnull=False)
    return row.to_ui_message()


def finish_sequence(session_id: str) -> int:
    return StreamChunk.objects.filter(stream_id=session_id, type="finish").values_list("sequence", flat=True).get()


def test_docs_send_records_the_cursor_and_sends_a_request_key(daphne_server_factory, token_headers, ai_package):  # noqa: F811
    site = site_server(daphne_server_factory, provider={"PACE_TPS": 0})
    out = run_docs_client(
        ai_package, mode="send", base=site.url("/helix/api"), chatId="s_docs_send", headers=token_headers, text="Hi"
    )
    assert out["error"] is None
    assert out["message"] == committed_assistant("s_docs_send")
    assert out["cursor"] == finish_sequence("s_docs_send")
    (key,) = out["requestKeys"]
    assert Run.objects.get(session_id="s_docs_send").request_key == key


def test_docs_reload_resumes_from_the_snapshot_target_exactly_once(daphne_server_factory, token_headers, ai_package):  # noqa: F811
    site = site_server(daphne_server_factory)
    session_id = "s_docs_reload"
    with httpx.Client(headers=token_headers, timeout=20) as client:
        body = {"id": session_id, "messages": [user_message("Reload me")], "trigger": "submit-message"}
        first = read_sse(client, "POST", site.url(f"/helix/api/sessions/{session_id}/chat"), json=body, stop_after=20)
        assert first.status == 200
        snapshot = client.get(site.url(f"/helix/api/sessions/{session_id}/snapshot")).json()
    assert snapshot["status"] == "active"

    out = run_docs_client(
        ai_package, mode="reload", base=site.url("/helix/api"), chatId=session_id, headers=token_headers
    )
    assert out["error"] is None
    committed = committed_assistant(session_id)
    assert out["message"] == committed
    assert "".join(p.get("text", "") for p in committed["parts"] if p["type"] == "text") == expected_reply("Reload me")
    assert snapshot["resumeMessageId"] not in out["seeded"]
    assert out["cursor"] == finish_sequence(session_id)
