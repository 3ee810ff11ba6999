"""Multi-process faults: three daphne processes, two task workers, random SIGKILLs mid-run (issue 21).

PostgreSQL (the suite's PostgreSQL pass) + Redis (stream manager and channels_redis layer);
the runs execute on the workers (TasksExecutor), each calls a side-effecting tool then
streams its answer. Each client sends on one web process, drops after a few chunks and
resumes on another, and keeps resuming (on a live process) until the stream's terminal
frame. At random runs one web process is killed, or one worker, mid-run (and started
again). Figures (printed): runs, kills, committed chunks lost, chunks doubled at
clients, side effects re-run, runs left non-terminal, runs whose client saw no terminal
frame.

Asserted: no chunk doubled at a client, no side effect re-run, no run left non-terminal,
no committed chunk lost, and every client ends at a truthful terminal: ``[DONE]`` for a
finished run, the typed ``error`` chunk (or a resume's typed 409 ``stream_failed``) for an
interrupted one (docs/transport.md, "Endings").
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from httpx_sse import EventSource

from helix_django.models import Run
from tests.scale.workers import Worker

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RUNS = 6
WORDS = [f"w{i}" for i in range(30)]
HELIX = {
    "EXECUTOR": "helix_django.runtime.tasks_executor.TasksExecutor",
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {
                    "PACE_TPS": 20,
                    "STEPS": [
                        {"TOOL_CALLS": [{"name": "record_effect", "arguments": {"note": "once"}}]},
                        {"TEXT": " ".join(WORDS)},
                    ],
                },
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": ["tests.scale.sidefx.record_effect"],
        }
    },
    "FLUSH_INTERVAL_MS": 2,
    "LEASE_SECONDS": 3,
    "LEASE_RENEW_SECONDS": 1,
}
NON_TERMINAL = ("starting", "streaming", "tooling", "recovering")


@pytest.fixture
def cluster(daphne_server_factory, scale_env):
    """Three web processes (with the relaunch scan) and two workers; the effects file."""
    effects = Path(tempfile.mkdtemp(prefix="helix-effects-")) / "effects.txt"
    env = {**scale_env, "HELIX_TEST_EFFECTS_PATH": str(effects)}
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": env}
    webs = [daphne_server_factory(asgi_app="tests.recovery.asgi_recovering:application", **kwargs) for _ in range(3)]
    workers = [Worker(HELIX, env=env, settings_module="tests.scale.settings").start() for _ in range(2)]
    yield webs, workers, effects
    for worker in workers:
        worker.stop()


TERMINAL_STATES = ("done", "error", "failed")


def read(
    client: httpx.Client, method: str, url: str, got: list, trail: list, stop_after: int | None = None, **kwargs
) -> str:
    """Read a chat response into ``got``; return a terminal state (``done``: [DONE], or a resume's 204:
    the client holds the whole run; ``error``: the run's typed error chunk; ``failed``: a resume's
    typed 409 ``stream_failed``), ``drop`` (cut, or a retryable drop error) or ``refused``.

    Each refusal's status and body, and each cut's exception, go to ``trail`` for the report."""
    try:
        with client.stream(method, url, **kwargs) as response:
            if response.status_code == 204 and method == "GET":
                return "done"
            if response.status_code != 200:
                response.read()
                trail.append((method, response.status_code, response.text[:200]))
                is_failed = response.status_code == 409 and response.json().get("error") == "stream_failed"
                return "failed" if is_failed else "refused"
            count = 0
            previous_id = None
            for sse in EventSource(response).iter_sse():
                # The SSE last-event-id carries over to events without an ``id:`` line (a drop's error).
                event_id, previous_id = (sse.id if sse.id != previous_id else None), sse.id or previous_id
                if sse.data == "[DONE]":
                    return "done"
                chunk = json.loads(sse.data) if sse.data else None
                if chunk and chunk.get("type") == "error":
                    if event_id:
                        got.append((int(event_id), chunk))
                    code = json.loads(chunk.get("errorText") or "{}").get("code")
                    return "drop" if code == "transport_stream_drop" else "error"
                if sse.id and sse.data:
                    got.append((int(sse.id), chunk))
                    count += 1
                    if stop_after is not None and count >= stop_after:
                        return "drop"
    except httpx.HTTPError as error:
        trail.append((method, type(error).__name__))
        return "drop"
    return "drop"


def one_client(client, webs, sid, rng, got, outcome) -> None:
    """Send on one process, drop, resume on others until the terminal frame (90 s at most).

    A send whose process died before it answered is sent again (same body) before any resume.
    """
    send_on, resume_on = rng.sample(range(len(webs)), 2)
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    path = f"/helix/api/sessions/{sid}/chat"
    trail = outcome.setdefault("trail", [])
    state = read(client, "POST", webs[send_on].url(path), got, trail, stop_after=rng.randint(2, 12), json=body)
    deadline = time.monotonic() + 90
    target = resume_on
    while state not in TERMINAL_STATES and time.monotonic() < deadline:
        server = webs[target]
        if server.is_running and not got:
            # No byte of the send came back (its process died before answering): the client
            # sends it again, as the AI SDK's retry does; its message id makes the repeat
            # attach to the run the first one started, if that committed (002, request keys).
            state = read(client, "POST", server.url(path), got, trail, json=body)
            trail.append((target, "send", state))
        elif server.is_running:
            cursor = max(s for s, _c in got)
            state = read(client, "GET", server.url(path), got, trail, headers={"X-Resume-From-Sequence": str(cursor)})
            trail.append((target, cursor, state))
        if state not in TERMINAL_STATES:
            time.sleep(0.3)
            target = (target + 1) % len(webs)
    outcome["state"] = state


def test_sigkills_of_web_processes_and_workers_double_no_chunk_rerun_no_side_effect_leave_no_run_open(
    cluster, user_headers, scale_env
):
    webs, workers, effects = cluster
    key_prefix = scale_env["HELIX_TEST_STREAM_PREFIX"]
    rng = random.Random(21)
    figures = Counter()
    sessions: dict[str, list] = {}
    outcomes: dict[str, dict] = {}
    with httpx.Client(headers={"Authorization": user_headers["Authorization"]}, timeout=60) as client:
        for index in range(RUNS):
            sid, got, outcome = f"chat_{uuid.uuid4().hex[:16]}", [], {}
            sessions[sid], outcomes[sid] = got, outcome
            reader = threading.Thread(target=one_client, args=(client, webs, sid, rng, got, outcome))
            reader.start()
            time.sleep(rng.uniform(0.5, 1.5))
            victim = None
            if index % 2 == 0:
                victim = webs[rng.randrange(len(webs))]
                victim.kill()
                figures["web kills"] += 1
            else:
                killed = rng.randrange(len(workers))
                workers[killed].kill()
                figures["worker kills"] += 1
            reader.join(120)
            figures["runs"] += 1
            figures["runs without a terminal frame"] += outcome.get("state") not in TERMINAL_STATES
            if victim is not None:
                victim.start()
            else:
                workers[killed] = Worker(HELIX, env=workers[killed].env, settings_module="tests.scale.settings").start()

    deadline = time.monotonic() + 30
    while Run.objects.filter(session_id__in=sessions, status__in=NON_TERMINAL).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    for got in sessions.values():
        received = [s for s, _c in got]
        figures["chunks doubled at clients"] += len(received) - len(set(received))
    lost = lost_chunks(
        sessions, key_prefix, told_failed={sid for sid, o in outcomes.items() if o.get("state") == "failed"}
    )
    figures["committed chunks lost"] = sum(len(chunks) for chunks in lost.values())
    figures["runs left non-terminal"] = Run.objects.filter(session_id__in=sessions, status__in=NON_TERMINAL).count()
    calls = Counter(effects.read_text().split()) if effects.exists() else Counter()
    figures["side effects re-run"] = sum(count - 1 for count in calls.values() if count > 1)
    print("multi-process fault figures:", dict(figures))
    print("chunks stored but not received, by session:", lost)
    assert figures["chunks doubled at clients"] == 0, figures
    assert figures["side effects re-run"] == 0, figures
    assert figures["runs left non-terminal"] == 0, figures
    assert figures["committed chunks lost"] == 0, (figures, lost)
    unended = {sid: outcome for sid, outcome in outcomes.items() if outcome.get("state") not in TERMINAL_STATES}
    for sid, outcome in unended.items():
        print("no terminal frame:", sid, "received", sorted(s for s, _c in sessions[sid]), "trail", outcome["trail"])
    assert figures["runs without a terminal frame"] == 0, (figures, unended)
    assert figures["web kills"] and figures["worker kills"], figures


def lost_chunks(sessions: dict[str, list], key_prefix: str, told_failed: set[str]) -> dict[str, list]:
    """Return, per session, the chunks its stream stored for clients (not internal) that its client never received.

    For a session in ``told_failed``, what its stream holds after the client's cursor reached
    the client as the resume's typed 409 ``stream_failed``, which sends it to the snapshot: not lost.
    """
    from asgiref.sync import async_to_sync

    from helix_django.streams.redis import RedisStreamManager

    manager = RedisStreamManager("check", {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": key_prefix})
    lost: dict[str, list] = {}
    for sid, got in sessions.items():
        received = {s for s, _c in got}
        stored = async_to_sync(manager.read_all)(sid)
        missing = [
            (s, c)
            for s, c in stored
            if not c.get("type", "").startswith("helix-")
            and s not in received
            and not (sid in told_failed and s > max(received, default=0))
        ]
        if missing:
            lost[sid] = [(s, c.get("type"), c.get("helixError", {}).get("code")) for s, c in missing]
    return lost
