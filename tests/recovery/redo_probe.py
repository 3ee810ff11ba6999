"""Offer every redo route to a run whose side-effecting tool has an unknown outcome (000, "Reconcile before retrying").

Used by the kill campaign on the runs its tool SIGKILLed right after the side effect: the
chat route (regenerate, keyed regenerate, edit), the WebSocket ``send`` (regenerate, edit),
the owner's REST recovery routes (regenerate, continue) and the staff actions
(:func:`helix_django.recovery.actions.aperform`). Each must refuse; a model call started
shows as a new run of the session.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from websockets.sync.client import connect

from helix_django.errors import HelixError
from helix_django.models import Message, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from tests.recovery.wire_endings import PREFIX


def _turn(run: Run) -> dict[str, Any]:
    text = Message.objects.get(session_id=run.session_id, ui_id=run.turn_message_id).text
    return {"id": run.turn_message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def probe_redo_routes(server: Any, run: Run, headers: dict[str, str], cookie: dict[str, str]) -> tuple[int, int]:
    """Try every redo route on ``run``; return ``(attempts, model calls started)``.

    A model call started is a run of the session other than ``run`` (a refused redo writes none).
    """
    turn = _turn(run)
    chat_url = server.url(f"{PREFIX}/sessions/{run.session_id}/chat")
    chat_bodies = [
        ({"trigger": "regenerate-message"}, {}),
        ({"trigger": "regenerate-message"}, {"X-Helix-Request-Key": f"rk-{run.id}"}),
        ({"trigger": "submit-message", "messageId": run.turn_message_id}, {}),
    ]
    attempts = 0
    with httpx.Client(timeout=30) as client:
        for extra, extra_headers in chat_bodies:
            body = {"id": run.session_id, "messages": [turn], **extra}
            client.post(chat_url, json=body, headers={**headers, **extra_headers})
            attempts += 1
        for action in ("regenerate", "continue"):
            client.post(server.url(f"{PREFIX}/sessions/{run.session_id}/runs/{run.id}/{action}"), headers=headers)
            attempts += 1
    ws_url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{run.session_id}/"
    for extra in ({"trigger": "regenerate-message"}, {"messageId": run.turn_message_id}):
        with connect(ws_url, additional_headers=cookie, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "send", "messages": [turn], **extra}))
            json.loads(ws.recv(timeout=15))  # the refusal (or the run frame of a redo that started)
        attempts += 1
    for action in (inv.REGENERATE, inv.CONTINUE):
        try:
            async_to_sync(aperform)(action, run.id, wait_seconds=5)
        except HelixError:
            pass  # refused: what must happen
        attempts += 1
    return attempts, Run.objects.filter(session_id=run.session_id).exclude(pk=run.pk).count()
