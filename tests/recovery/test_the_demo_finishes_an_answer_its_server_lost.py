"""The demo, without an API key, finishes an answer whose server was killed: the same answer, in full.

``example_project.settings`` as ``make demo`` runs it (SQLite, the in-memory channel layer,
the scripted model at a human pace), on a SQLite file and a cache folder of this test, served
by daphne. The server is SIGKILLed mid-answer and started again: the scripted model's durable
operation lives in the cache every process of the demo shares, so the next process's relaunch
scan finds it still running and finishes the same run from it (000, "Background operations are
easier to recover than ephemeral streams"): one run, one provider operation, the full reply,
and a client resuming from its cursor is told the run ended cleanly.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from helix_django.runtime.providers.scripted import default_reply
from tests.live import LiveServer
from tests.recovery.live_chat import PROMPT, LiveChat
from tests.scale.pgsite import prepare_site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

#: The demo's pace (tokens per second): its default reply (~200 tokens) takes about 7 s.
PACE = "30"
ENDINGS = ("finish", "data-stream-resync", "error")
TERMINAL = ("completed", "interrupted", "failed", "cancelled")


def _site_rows(database: Path, session_id: str) -> list[tuple[str, str]]:
    """Return ``[(status, provider_operation_id)]`` of the session's runs, read from the site's own SQLite file."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=20) as db:
        return db.execute(
            "SELECT status, provider_operation_id FROM helix_django_run WHERE session_id = ?", (session_id,)
        ).fetchall()


def _answer_text(server: LiveServer, headers: dict[str, str], session_id: str) -> str:
    """Return the assistant's text in the session's snapshot (what a reload shows)."""
    snapshot = httpx.get(server.url(f"/helix/api/sessions/{session_id}/snapshot"), headers=headers, timeout=10).json()
    answers = [m for m in snapshot["messages"] if m["role"] == "assistant"]
    assert len(answers) == 1, snapshot
    return "".join(p.get("text", "") for p in answers[0]["parts"] if p.get("type") == "text")


def _resume_until_ended(chat: LiveChat, database: Path, cursor: int, seconds: float) -> list | httpx.Response:
    """Resume from ``cursor`` until the chat route ends the run: its last frames (finish, resync or a typed
    error), or its answer once the site's database says the run ended (a JSON response)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = chat.resume(cursor, timeout=30)
        if isinstance(answer, list) and any(c.get("type") in ENDINGS for c in answer):
            return answer
        if isinstance(answer, httpx.Response) and _site_rows(database, chat.session_id)[0][0] in TERMINAL:
            return answer
        time.sleep(0.5)
    raise AssertionError("the run never ended on the wire")


def test_a_killed_demo_server_finishes_the_same_answer_after_its_restart(tmp_path):
    database = tmp_path / "example.sqlite3"
    env = {
        "HELIX_SQLITE_PATH": str(database),
        "HELIX_CACHE_DIR": str(tmp_path / "cache"),
        "HELIX_DEMO_PACE": PACE,
        "HELIX_LOG_LEVEL": "WARNING",
    }
    headers = {"Authorization": f"Token {prepare_site(None, 'example_project.settings', env)}"}
    server = LiveServer(
        asgi_app="example_project.asgi:application", settings_module="example_project.settings", env=env
    )
    server.start()
    try:
        chat = LiveChat(server, headers)
        chat.send(until=lambda c: len(c.text) > 40)
        cursor = chat.chunks[-1][0]
        server.kill()
        [(status, operation)] = _site_rows(database, chat.session_id)
        assert status == "streaming"

        server.start()
        ending = _resume_until_ended(chat, database, cursor, 60)
        assert _site_rows(database, chat.session_id) == [("completed", operation)]  # the same run, one operation
        assert operation  # a durable operation the next process could ask about
        assert _answer_text(server, headers, chat.session_id) == default_reply(PROMPT)
        assert isinstance(ending, list) and not [c for c in ending if c.get("type") == "error"], ending
    finally:
        server.stop()
