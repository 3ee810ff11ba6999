"""Offer every redo route to a run whose side-effecting tool has an unknown outcome (000, "Reconcile before retrying").

Used by the kill campaign on the runs its tool SIGKILLed right after the side effect: the
chat route (regenerate, keyed regenerate, edit), the WebSocket ``send`` (regenerate, edit),
the owner's REST recovery routes (regenerate, continue) and the staff actions
(:func:`helix_django.recovery.actions.aperform`). Each must refuse; a model call started
shows as a new run of the session.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from helix_django.errors import HelixError
from helix_django.models import Message, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.runtime.executor import get_executor
from tests.recovery.wire_endings import PREFIX


def _turn(run: Run) -> dict[str, Any]:
    text = Message.objects.get(session_id=run.session_id, ui_id=run.turn_message_id).text
    return {"id": run.turn_message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def probe_redo_routes(server: Any, run: Run, headers: dict[str, str], cookie: dict[str, str]) -> tuple[int, int]:
    """Try every redo route on ``run``; return ``(attempts, model calls started)``.

    A model call started is a run of the session other than ``run`` (a refused redo writes
    none). A redo that did start may re-run the tool, which kills the server again: the
    attempt's connection error is ignored and the server restarted for the next attempt.
    """
    turn = _turn(run)
    chat_url = server.url(f"{PREFIX}/sessions/{run.session_id}/chat")
    ws_url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{run.session_id}/"

    def chat(extra: dict[str, Any], extra_headers: dict[str, str]) -> None:
        body = {"id": run.session_id, "messages": [turn], **extra}
        httpx.post(chat_url, json=body, headers={**headers, **extra_headers}, timeout=30)

    def rest(action: str) -> None:
        httpx.post(
            server.url(f"{PREFIX}/sessions/{run.session_id}/runs/{run.id}/{action}"), headers=headers, timeout=30
        )

    def websocket(extra: dict[str, Any]) -> None:
        with connect(ws_url, additional_headers=cookie, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "send", "messages": [turn], **extra}))
            ws.recv(timeout=15)  # the refusal (or the run frame of a redo that started)

    def staff(action: str) -> None:
        with contextlib.suppress(HelixError):  # refused: what must happen
            async_to_sync(aperform)(action, run.id, executor=get_executor(), wait_seconds=5)

    attempts = [
        lambda: chat({"trigger": "regenerate-message"}, {}),
        lambda: chat({"trigger": "regenerate-message"}, {"X-Helix-Request-Key": f"rk-{run.id}"}),
        lambda: chat({"trigger": "submit-message", "messageId": run.turn_message_id}, {}),
        lambda: rest("regenerate"),
        lambda: rest("continue"),
        lambda: websocket({"trigger": "regenerate-message"}),
        lambda: websocket({"messageId": run.turn_message_id}),
        lambda: staff(inv.REGENERATE),
        lambda: staff(inv.CONTINUE),
    ]
    for attempt in attempts:
        with contextlib.suppress(httpx.TransportError, OSError, ConnectionClosed, TimeoutError):
            attempt()
        if not server.is_running:
            server.start()
    return len(attempts), Run.objects.filter(session_id=run.session_id).exclude(pk=run.pk).count()
