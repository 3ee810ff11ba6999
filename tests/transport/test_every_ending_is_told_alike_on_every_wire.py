"""Each way a real run ends, told on every wire (docs/transport.md, "Endings: how each run status is told").

One daphne server, the scripted provider with one rule per ending. Each run is sent on the
chat route and on ``POST chat`` (their live answers), then read again after its end: the
chat route and ``GET chat/<id>/stream`` with a cursor inside the run, the chat route with
the replay prefix, the raw stream route and the WebSocket. Every wire must tell the same
ending: ``finish``/``abort`` then ``[DONE]`` or one typed ``error`` on the AI SDK stream
(a cursor resume of a failed stream is the typed 409 ``stream_failed`` carrying the
run's code), ``end``/``fail`` on the others.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from helix_django.models import Run
from tests.transport.conftest import (
    PREFIX,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
    wait_for_run_status,
    ws_terminal,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SIX = "one two three four five six"
LOOP_STEP = {"TEXT": "Again. ", "TOOL_CALLS": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}
RULES = [
    {"MATCH": "^complete", "TEXT": "All done here."},
    {"MATCH": "^fail", "TEXT": SIX, "FAIL_AFTER_CHUNKS": 3},
    {"MATCH": "^retryable", "TEXT": SIX, "FAIL_AFTER_CHUNKS": 3, "FAIL_RETRYABLE": True},
    {"MATCH": "^drop", "TEXT": SIX, "DROP_AFTER_CHUNKS": 3},
    {"MATCH": "^hang", "TEXT": SIX, "HANG_AFTER_CHUNKS": 3},
    {"MATCH": "^tool", "TOOL_CALLS": [{"name": "pick_color", "arguments": {"prompt": "p"}}]},
    {"MATCH": "^loop", "STEPS": [LOOP_STEP]},
    {"MATCH": "^big", "TEXT": "word " * 20_000},
]
DONE = ("[DONE]",)


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    from tests.live import LiveServer

    with django_db_blocker.unblock():
        live = LiveServer(
            helix={**agent_settings(tools=["pick_color", "lookup"], RULES=RULES), "MAX_MESSAGE_BYTES": 64 * 1024}
        )
        live.start()
    yield live
    live.stop()


def settled(sid: str) -> Run:
    """The session's run once it ended or waits for the browser."""
    for _ in range(500):
        run = Run.objects.filter(session_id=sid).order_by("-created_at").first()
        if run is not None and (not run.is_live or run.status == "suspended_client_tool"):
            return run
        time.sleep(0.02)
    raise AssertionError(f"the run of {sid} did not end: {run.status if run else None}")


def told_sse(result) -> tuple:
    """An AI SDK response's ending: ``(last chunk type [, error code], "[DONE]"?)``, or ``(status, code)``."""
    if not result.events:
        return (result.status, (result.body or {}).get("code"))
    last = result.events[-1]
    if last.data == "[DONE]":
        return (result.events[-2].chunk["type"], "[DONE]")
    chunk = last.chunk
    if chunk["type"] == "error":
        return ("error", json.loads(chunk["errorText"])["code"])
    return (chunk["type"],)


def told_frame(frame: dict) -> tuple:
    """A raw stream / WebSocket terminal: ``("end", status)`` or ``("fail", code)``."""
    if frame["type"] == "end":
        return ("end", frame["status"])
    return (frame["type"], (frame.get("errorDetail") or {}).get("code"))


def every_wire(server, client, headers, sid) -> dict[str, tuple]:
    """What each wire tells of the session's ended run."""
    run = Run.objects.filter(session_id=sid).order_by("-created_at").first()
    cursor = str(run.start_sequence + 1)
    at_cursor = {"X-Resume-From-Sequence": cursor}
    prefix = {"X-Existing-Message-Id": run.response_message_id, "X-Helix-Replay-Prefix": "1"}
    raw = read_sse(client, "GET", server.url(f"{PREFIX}/sessions/{sid}/stream"), headers={"Last-Event-ID": cursor})
    return {
        "chat resume": told_sse(read_sse(client, "GET", chat_url(server, sid), headers=at_cursor)),
        "aisdk resume": told_sse(read_sse(client, "GET", server.url(f"{PREFIX}/chat/{sid}/stream"), headers=at_cursor)),
        "chat prefix": told_sse(read_sse(client, "GET", chat_url(server, sid), headers=prefix)),
        "raw": told_frame(raw.events[-1].chunk),
        "ws": told_frame(ws_terminal(server, sid, headers, int(cursor))),
    }


#: A clean ending replayed as the committed message: its parts, the end marker, ``[DONE]`` (no ``finish``).
REPLAYED = ("data-helix-replay", "[DONE]")


def expected(status_sse: tuple, frame: tuple, *, resume: tuple | None = None, prefix: tuple | None = None) -> dict:
    resumed = resume or status_sse
    return {
        "chat send": status_sse,
        "aisdk send": status_sse,
        "chat resume": resumed,
        "aisdk resume": resumed,
        "chat prefix": prefix or status_sse,
        "raw": frame,
        "ws": frame,
    }


ENDINGS = {
    "complete": ("completed", expected(("finish", *DONE), ("end", "completed"), prefix=REPLAYED)),
    # MAX_STEPS: finishReason "length"
    "loop": ("completed", expected(("finish", *DONE), ("end", "completed"), prefix=REPLAYED)),
    "tool": ("suspended_client_tool", expected(("finish-step", *DONE), ("end", "paused"), prefix=REPLAYED)),
    "fail": (
        "failed",
        expected(("error", "provider_error"), ("fail", "provider_error"), resume=(409, "provider_error")),
    ),
    "retryable": (
        "failed",
        expected(("error", "provider_error"), ("fail", "provider_error"), resume=(409, "provider_error")),
    ),
    "drop": (
        "interrupted",
        expected(("error", "run_interrupted"), ("fail", "run_interrupted"), resume=(409, "run_interrupted")),
    ),
    "big": (
        "failed",
        expected(
            ("error", "run_response_too_large"),
            ("fail", "run_response_too_large"),
            resume=(409, "run_response_too_large"),
        ),
    ),
}


@pytest.mark.parametrize("text", sorted(ENDINGS))
def test_a_run_ending_is_told_alike_on_every_wire(server, users, text):
    status, wires = ENDINGS[text]
    headers = users["a"][1]
    with httpx.Client(headers=headers, timeout=15) as client:
        aisdk_sid = new_session_id()
        aisdk = read_sse(client, "POST", server.url(f"{PREFIX}/chat"), json=send_body(aisdk_sid, [user_message(text)]))
        sid = new_session_id()
        told = {
            "chat send": told_sse(
                read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message(text)]))
            )
        }
        told["aisdk send"] = told_sse(aisdk)
        assert settled(sid).status == status
        told.update(every_wire(server, client, headers, sid))
    assert told == wires


def test_a_stopped_run_is_told_cancelled_on_every_wire_live_and_after(server, users):
    headers = users["a"][1]
    sid = new_session_id()
    live = {}

    def send():
        with httpx.Client(headers=headers, timeout=15) as c:
            live["chat send"] = read_sse(c, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hang")]))

    def raw_live():
        with httpx.Client(headers=headers, timeout=15) as c:
            live["raw live"] = read_sse(c, "GET", server.url(f"{PREFIX}/sessions/{sid}/stream"))

    def ws_live():
        live["ws live"] = ws_terminal(server, sid, headers, 0)

    sender = threading.Thread(target=send)
    sender.start()
    run = wait_for_run_status(sid)
    time.sleep(0.3)
    readers = [threading.Thread(target=raw_live), threading.Thread(target=ws_live)]
    for reader in readers:
        reader.start()
    time.sleep(0.3)
    with httpx.Client(headers=headers, timeout=15) as client:
        stopped = client.post(server.url(f"{PREFIX}/sessions/{sid}/runs/{run.id}/cancel"))
        assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"
        for thread in (sender, *readers):
            thread.join(15)
        told = {
            "chat send": told_sse(live["chat send"]),
            "raw live": told_frame(live["raw live"].events[-1].chunk),
            "ws live": told_frame(live["ws live"]),
            **every_wire(server, client, headers, sid),
        }
    abort = ("abort", "[DONE]")
    cancelled = ("end", "cancelled")
    assert told == {
        "chat send": abort,
        "raw live": cancelled,
        "ws live": cancelled,
        "chat resume": abort,
        "aisdk resume": abort,
        "chat prefix": abort,
        "raw": cancelled,
        "ws": cancelled,
    }
