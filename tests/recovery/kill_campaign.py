"""The kill campaign of issue 17: SIGKILL many live runs, recover them, and read every ending on every wire.

Run it on its own SQLite database (a fresh file, migrated)::

    python -m tests.recovery.kill_campaign --runs 100 --races 50

tests/recovery/test_kill_campaign.py runs :func:`campaign` with small counts in CI. Each
cycle starts a daphne server (tests/live.py) with chats at a human pace: one is cancelled
through the owner's cancel route, one fails in its provider, the rest are SIGKILLed mid-answer
(every other cycle, the first included, by a side-effecting tool that kills its own process right after its effect,
tests/recovery/faulttools.py). A reader is attached to each chat before the kill; after the
lease expired, ``helix_recover`` runs, the server restarts, and each run's ending is read
from the reader's cursor on the chat route, the raw stream route and a WebSocket that sends
``resume`` twice (tests/recovery/wire_endings.py). A run killed in its tool is then offered every
redo route (tests/recovery/redo_probe.py). Last, the reconcile-vs-finish race
(tests/recovery/finish_race.py). The figures printed must all be 0; the exit status is 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tests.recovery.campaign_figures import Figures
from tests.recovery.wire_endings import duplicated_sequences

RULES = [{"MATCH": "^FAIL", "FAIL_AT_FRACTION": 0.3}]
PACE_TPS = 10
KILLED_PER_CYCLE = 10
TOOL = "tests.recovery.faulttools.create_issue"


@dataclasses.dataclass
class Chat:
    """One chat of a cycle: its session, the reader attached before the kill, and what it is for."""

    session_id: str
    prompt: str
    items: list[Any] = dataclasses.field(default_factory=list)
    thread: threading.Thread | None = None

    @property
    def cursor(self) -> int:
        """The last sequence the reader rendered (0 if none)."""
        sequences = [i["_sequence"] for i in self.items if isinstance(i, dict) and i.get("_sequence")]
        return max(sequences, default=0)


def helix_for(cycle: int) -> dict[str, Any]:
    """The server's HELIX of ``cycle``: short leases, the scripted provider, a tool named per cycle."""
    from tests.recovery.live_chat import REPLY, agent

    tool_rule = {
        "MATCH": "^TOOL",
        "STEPS": [
            {
                "TEXT": "Creating the issue.",
                "TOOL_CALLS": [{"id": "call-1", "name": "create_issue", "arguments": {"title": f"cycle-{cycle}"}}],
            },
            {"TEXT": "The issue exists now."},
        ],
    }
    return agent({"TEXT": REPLY, "PACE_TPS": PACE_TPS, "RULES": [*RULES, tool_rule]}, tools=[TOOL])


def start_chat(server: Any, headers: dict[str, str], prompt: str) -> Chat:
    """POST ``prompt`` on a new session; a thread reads the response (the reader attached before the kill)."""
    from tests.recovery.wire_endings import read_chat

    chat = Chat(f"chat_{uuid.uuid4().hex[:16]}", prompt)
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": prompt}]}
    body = {"id": chat.session_id, "messages": [message], "trigger": "submit-message"}
    chat.thread = threading.Thread(
        target=lambda: read_chat(server, chat.session_id, headers, body=body, on_item=chat.items.append)
    )
    chat.thread.start()
    return chat


def latest_run(session_id: str) -> Any:
    """The session's latest run (None before the send committed)."""
    from helix_django.models import Run

    return Run.objects.filter(session_id=session_id).order_by("-created_at").first()


def wait(condition: Any, timeout: float = 30.0) -> bool:
    """Poll ``condition()`` every 50 ms until it holds (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def has_text(chat: Chat) -> bool:
    """Whether the chat's reader rendered a text delta."""
    return any(isinstance(i, dict) and i.get("type") == "text-delta" for i in chat.items)


def run_cycle(server: Any, cycle: int, killed: int, figures: Figures, rng: random.Random) -> list[str]:
    """Break one batch of runs, recover it and judge every ending; return the tool-killed sessions."""
    import httpx
    from django.core.management import call_command

    from tests.recovery.live_chat import user_token, wait_lease_expired

    headers = user_token()
    server.helix = helix_for(cycle)
    server.start()
    by_tool = cycle % 2 == 0
    chats = [start_chat(server, headers, f"Question {n} of cycle {cycle}") for n in range(killed - by_tool)]
    cancelled = start_chat(server, headers, f"Stop me, cycle {cycle}")
    failing = start_chat(server, headers, f"FAIL please, cycle {cycle}")
    wait(lambda: all(has_text(c) for c in [*chats, cancelled]))
    watched = [watch_live(server, chat, websocket_cookie(headers)) for chat in chats[:2]]
    run = latest_run(cancelled.session_id)
    answer = httpx.post(
        server.url(f"/helix/api/sessions/{cancelled.session_id}/runs/{run.id}/cancel"), headers=headers, timeout=30
    )
    if answer.status_code != 200:
        figures.notes.append(f"cancel {cancelled.session_id}: {answer.status_code} {answer.text[:120]}")
    wait(lambda: latest_run(failing.session_id) and latest_run(failing.session_id).status == "failed")
    time.sleep(rng.uniform(0.0, 1.0))  # vary how far the killed answers got
    if by_tool:
        chats.append(start_chat(server, headers, f"TOOL create an issue, cycle {cycle}"))
        wait(lambda: not server.is_running)
    server.kill()
    for chat in [*chats, cancelled, failing]:
        chat.thread.join(30)
    for thread, frames in watched:
        thread.join(30)
        figures.bad_ws_duplicates += duplicated_sequences(frames)
    for chat in chats:
        wait_lease_expired(latest_run(chat.session_id))
    call_command("helix_recover", stdout=open(os.devnull, "w"))  # noqa: SIM115 - the devnull handle is throwaway
    server.helix = helix_for(cycle + 1)
    server.start()
    cookie = websocket_cookie(headers)
    tool_sessions = []
    for chat in chats:
        run = latest_run(chat.session_id)
        figures.killed += 1
        if run.status != "interrupted":
            figures.notes.append(f"killed {chat.session_id} ended {run.status}")
            continue
        figures.interrupted += 1
        if chat.prompt.startswith("TOOL"):
            figures.tool_unknown += run.tool_executions.filter(status="unknown").count()
            tool_sessions.append(chat.session_id)
        judge_error(server, chat, run, headers, cookie, figures)
    figures.cancelled += 1
    judge_cancel(server, cancelled, headers, cookie, figures)
    figures.failed += 1
    judge_error(server, failing, latest_run(failing.session_id), headers, cookie, figures)
    for session_id in tool_sessions:
        from tests.recovery.redo_probe import probe_redo_routes

        attempts, calls = probe_redo_routes(server, latest_run(session_id), headers, cookie)
        figures.redo_attempts += attempts
        figures.bad_model_calls_over_unknown += calls
    server.stop()
    return tool_sessions


def watch_live(server: Any, chat: Chat, cookie: dict[str, str]) -> tuple[threading.Thread, list[dict[str, Any]]]:
    """Follow ``chat``'s live run on a WebSocket that resumes twice (until the kill); return the thread and its frames."""
    from tests.recovery.wire_endings import watch_websocket_live

    frames: list[dict[str, Any]] = []
    thread = threading.Thread(target=watch_websocket_live, args=(server, chat.session_id, cookie, frames))
    thread.start()
    return thread, frames


def websocket_cookie(headers: dict[str, str]) -> dict[str, str]:
    """A session cookie of the user owning the token in ``headers`` (the WebSocket authenticates by session)."""
    from django.conf import settings
    from django.test import Client
    from rest_framework.authtoken.models import Token

    client = Client()
    client.force_login(Token.objects.get(key=headers["Authorization"].split()[1]).user)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"}


def safely(read: Any, *args: Any) -> list[Any]:
    """``read(*args)``, or ``[]`` (no ending at all) when the read timed out or its connection broke."""
    import httpx
    from websockets.exceptions import WebSocketException

    try:
        return read(*args)
    except (OSError, TimeoutError, ValueError, httpx.HTTPError, WebSocketException) as exc:
        return [{"type": "<read failed>", "exception": type(exc).__name__}]


def judge_error(server: Any, chat: Chat, run: Any, headers: dict, cookie: dict, figures: Figures) -> None:
    """Read an interrupted/failed run's ending from the reader's cursor on the three routes."""
    from tests.recovery import wire_endings as wire

    code, cursor = run.error_code, chat.cursor
    if run.status == "failed":
        # The reader attached before the failure saw it end; a resume then re-reads the run from its start
        # (a cursor at the head of a finished run is 204 by design: the client holds everything).
        if not wire.chat_ends_with_typed_error(chat.items, code):
            figures.bad_untyped_chat += 1
            figures.notes.append(f"live chat {chat.session_id} ({run.status}): {chat.items[-2:]}")
        cursor = run.start_sequence
    resumed = wire.read_chat(
        server, chat.session_id, headers, cursor=cursor
    )  # never raises: it records a lost transport
    if not wire.chat_ends_with_typed_error(resumed, code):
        figures.bad_untyped_chat += 1
        figures.notes.append(f"chat {chat.session_id} ({run.status}) from {cursor}: {resumed[-2:]}")
    raw = safely(wire.read_raw_stream, server, chat.session_id, headers, cursor)
    if not wire.frames_end_truthfully(raw, run.status, code):
        figures.bad_untyped_raw += 1
        figures.notes.append(f"raw {chat.session_id} ({run.status}) from {cursor}: {raw[-1:]}")
    frames = safely(wire.read_websocket_doubled, server, chat.session_id, cookie, cursor)
    figures.bad_ws_duplicates += wire.duplicated_sequences(frames)
    if not wire.frames_end_truthfully(frames, run.status, code):
        figures.bad_untyped_ws += 1
        figures.notes.append(f"ws {chat.session_id} ({run.status}) from {cursor}: {frames[-1:]}")


def judge_cancel(server: Any, chat: Chat, headers: dict, cookie: dict, figures: Figures) -> None:
    """A cancelled run ends ``abort`` then ``[DONE]`` for its live reader and a resume; ``end/cancelled`` on a WebSocket."""
    from tests.recovery import wire_endings as wire

    run = latest_run(chat.session_id)
    for label, items in (("live", chat.items), ("resume", wire.read_chat(server, chat.session_id, headers, cursor=0))):
        if run.status != "cancelled" or not wire.chat_ends_with_abort(items):
            figures.bad_cancel_without_abort += 1
            figures.notes.append(f"cancel {label} {chat.session_id} ({run.status}): {items[-2:]}")
    frames = safely(wire.read_websocket_doubled, server, chat.session_id, cookie, 0)
    figures.bad_ws_duplicates += wire.duplicated_sequences(frames)


def campaign(*, runs: int, races: int, tracker: Path, seed: int = 17, log: Any = None) -> Figures:
    """Run the campaign (``runs`` SIGKILLed runs, ``races`` finish races) on the configured database.

    The database must be visible to server processes (a file, committed): the pytest
    wrapper uses the live test database, :func:`main` a fresh file.
    """
    from django.conf import settings
    from django.test import override_settings

    from tests.live import LiveServer
    from tests.recovery.finish_race import race_finishes

    rng = random.Random(seed)
    figures = Figures()
    os.environ["HELIX_TEST_TRACKER"] = str(tracker)
    env = {"HELIX_TEST_TRACKER": str(tracker), "HELIX_TEST_DIE_IN_TOOL": "after_effect"}
    server = LiveServer(helix=helix_for(0), env=env)
    cycle = 0
    try:
        # Over the run's own HELIX (tests/settings.py), as the server's overrides are (tests/live.py).
        with override_settings(HELIX={**settings.HELIX, **helix_for(0)}):
            while figures.killed < runs:
                run_cycle(server, cycle, min(KILLED_PER_CYCLE, runs - figures.killed), figures, rng)
                cycle += 1
                if log:
                    print(f"cycle {cycle}: killed={figures.killed}", file=log, flush=True)
        if races:
            race_finishes(races, figures, rng)
    finally:
        server.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    """Set Django up on a fresh SQLite file, run the campaign, print the figures; 1 if any is not 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="SIGKILLed runs (default 100)")
    parser.add_argument("--races", type=int, default=50, help="reconcile-vs-finish races (default 50)")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="helix-kill-campaign-"))
    os.environ["HELIX_SQLITE_PATH"] = str(workdir / "campaign.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # sync ORM calls next to reader threads
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    figures = campaign(
        runs=args.runs, races=args.races, tracker=workdir / "tracker.jsonl", seed=args.seed, log=sys.stderr
    )
    print(figures.report())
    return 0 if figures.is_clean else 1


if __name__ == "__main__":
    sys.exit(main())
