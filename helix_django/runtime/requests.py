"""Request input: validation of UIMessages, input hashes, request keys, tool answers.

The request-key table (002, "Retried sends and request keys"): a repeat of a key never
runs again.

=====================================  ==============================================
the key's run                          what the repeated send gets
=====================================  ==============================================
none                                   a normal send, with the key
live (suspended included)              the original run's stream from its start
finished, still the session's latest   that run's terminal replay
finished, a later turn exists          RequestAlreadyCompletedError (``runId``)
any, but other input                   RequestKeyConflictError (``runId``), nothing written
=====================================  ==============================================
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy

from helix_django import store
from helix_django.errors import RequestAlreadyCompletedError, RequestKeyConflictError, ValidationError
from helix_django.ids import validate_message_id
from helix_django.models import ChatSession, Message, Run, RunStatus, ToolExecution, ToolExecutionStatus
from helix_django.orm import retrying, sync_to_async
from helix_django.runtime.context import is_tool_part
from helix_django.runtime.handles import RunHandle
from helix_django.store.reads import read_rows

if TYPE_CHECKING:
    from helix_django.runtime.local_runs import LocalRuns


def validate_messages(messages: Any) -> list[dict[str, Any]]:
    """Return ``messages`` if it is a non-empty list of UIMessages ``{id, role, parts}``.

    Raises ValidationError (``cause: messages``); nothing of the input is echoed.
    """
    if not isinstance(messages, list) or not messages:
        raise ValidationError(gettext_lazy("A send needs at least one message"), cause="messages")
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
            raise ValidationError(gettext_lazy("Invalid message"), cause="messages")
        if not isinstance(message.get("parts", []), list):
            raise ValidationError(gettext_lazy("Invalid message parts"), cause="messages")
        validate_message_id(message.get("id"))
    return messages


def clean_user_message(message: dict[str, Any]) -> dict[str, Any]:
    """Return the persisted form of a user message: ``{id, role, parts, metadata}``."""
    return {
        "id": message["id"],
        "role": "user",
        "parts": [p for p in message.get("parts", []) if isinstance(p, dict)],
        "metadata": message.get("metadata") or {},
    }


def input_hash(kind: str, payload: Any) -> str:
    """Return the SHA-256 of the canonical JSON of a request's input (what a key is bound to)."""
    canonical = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def send_hash(message: dict[str, Any]) -> str:
    """Return the input hash of a send: the new user message's role and parts (not its id)."""
    return input_hash("send", {"role": message.get("role"), "parts": message.get("parts", [])})


def send_start_request(session_id: str, message: dict[str, Any], *, request_key: str | None) -> store.RunStartRequest:
    """Return the run-start request of a send: the user UIMessage ``message`` appended as the turn.

    ``message``: the trailing ``{"id", "role": "user", "parts", "metadata"?}`` of a chat
    body that passed :func:`validate_messages`. The request (``kind="send"``) carries it
    cleaned (:func:`clean_user_message`) as its one input and as the turn, with
    ``input_hash`` its :func:`send_hash` (what ``request_key`` is bound to; an empty key is
    none). The caller fills in the rest (``truncate_to`` for an edit, agent, lease, claim).
    No I/O; raises nothing for a validated message.
    """
    cleaned = clean_user_message(message)
    return store.RunStartRequest(
        session_id=session_id,
        kind="send",
        input_messages=[cleaned],
        request_key=request_key or None,
        input_hash=send_hash(cleaned),
        turn_message_id=cleaned["id"],
    )


def _keyed_run(session_id: str, request_key: str, digest: str) -> tuple[Run, bool] | None:
    run = Run.objects.filter(session_id=session_id, request_key=request_key).first()
    if run is None:
        return None
    if run.input_hash != digest:
        raise RequestKeyConflictError(runId=run.id)
    if run.is_live:
        return run, True
    current = ChatSession.objects.filter(pk=session_id).values_list("current_run_id", flat=True).first()
    if current != run.id:
        raise RequestAlreadyCompletedError(runId=run.id)
    return run, False


def lookup_request_key(session_id: str, request_key: str, digest: str) -> tuple[Run, bool] | None:
    """Apply the request-key table on the ORM's thread (see :func:`alookup_request_key`)."""
    return _keyed_run(session_id, request_key, digest)


async def alookup_request_key(session_id: str, request_key: str, digest: str) -> tuple[Run, bool] | None:
    """Apply the request-key table: None (no run yet) or ``(run, is_live)`` to attach to.

    Raises RequestKeyConflictError or RequestAlreadyCompletedError (both carry ``runId``).
    """
    return await sync_to_async(_keyed_run)(session_id, request_key, digest)


async def akeyed_duplicate(runs: LocalRuns, session: ChatSession, request_key: str, digest: str) -> RunHandle | None:
    """Return the handle of the run ``request_key`` already started (a keyed repeat), or None.

    ``digest``: the repeat's input hash. A live run here is answered once its stream
    claim landed (``runs.wait_claimed``), so the repeat's stream is readable. Raises
    RequestKeyConflictError / RequestAlreadyCompletedError (``runId``) as
    :func:`alookup_request_key` does.
    """
    found = await alookup_request_key(session.id, request_key, digest)
    if found is None:
        return None
    run, is_live = found
    if is_live:
        await runs.wait_claimed(run.id)
    return RunHandle(
        run.id,
        session.stream_id,
        run.response_message_id,
        run.start_sequence,
        is_duplicate=True,
        run_status=run.status,
    )


def tool_answers(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Extract tool results and approval answers from a trailing assistant UIMessage.

    Returns ``[{"toolCallId", "output"} | {"toolCallId", "errorText"} | {"toolCallId", "approved": bool}]``.
    """
    answers: list[dict[str, Any]] = []
    for part in message.get("parts", []):
        if not isinstance(part, dict) or not is_tool_part(part) or not isinstance(part.get("toolCallId"), str):
            continue
        state, call_id = part.get("state"), part["toolCallId"]
        approval = part.get("approval")
        if not isinstance(approval, dict):
            approval = {}
        if state == "approval-responded" or (state == "output-denied" and "approved" in approval):
            answers.append({"toolCallId": call_id, "approved": bool(approval.get("approved"))})
        elif state == "output-available":
            answers.append({"toolCallId": call_id, "output": part.get("output")})
        elif state == "output-error":
            answers.append({"toolCallId": call_id, "errorText": str(part.get("errorText", ""))[:500]})
    return answers


def _is_superseded_response(session_id: str, ui_id: str) -> bool:
    latest = (
        Run.objects.filter(session_id=session_id, response_message_id=ui_id)
        .order_by("-started_at", "-pk")
        .values_list("status", flat=True)
        .first()
    )
    return latest == RunStatus.SUPERSEDED


ais_superseded_response = sync_to_async(_is_superseded_response)
"""``await ais_superseded_response(session_id, ui_id)``: whether the message's latest run was superseded."""


def _pending(run_id: str) -> list[ToolExecution]:
    return list(
        ToolExecution.objects.filter(
            run_id=run_id,
            status__in=[ToolExecutionStatus.AWAITING_CLIENT, ToolExecutionStatus.AWAITING_APPROVAL],
        ).order_by("id")
    )


apending_tool_executions = sync_to_async(_pending)


def _rows(session_id: str, before: int) -> list[dict[str, Any]]:
    return [row.ui_message() for row in read_rows(session_id, before=before)]


aload_rows = sync_to_async(_rows)
"""``await aload_rows(session_id, before)``: committed UIMessages at positions < ``before``."""


def _begin_streaming(run_id: str, session_id: str, before: int) -> list[dict[str, Any]]:
    """Mark the run ``streaming`` (fenced, :func:`helix_django.store.update_run`); return the rows of :func:`_rows`."""
    store.update_run(run_id, status=RunStatus.STREAMING)
    return _rows(session_id, before)


abegin_streaming = retrying(_begin_streaming, what="run start")
"""``await abegin_streaming(run_id, session_id, before)``: the first hop of a run its run-start commit did not
mark ``streaming`` (a handed-off run's worker): a write, retried; then the conversation's read."""


def _response_row(session_id: str, position: int, ui_id: str) -> dict[str, Any] | None:
    row = Message.objects.filter(session_id=session_id, position=position, ui_id=ui_id).first()
    return row.to_ui_message() if row else None


aload_response_row = sync_to_async(_response_row)


def _user_position(session_id: str, ui_id: str) -> int | None:
    rows = Message.objects.filter(session_id=session_id, position__isnull=False, role="user")
    if ui_id:
        rows = rows.filter(ui_id=ui_id)
    row = rows.order_by("-position").first()
    return row.position if row else None


def _user_id(session_id: str, position: int) -> str:
    return Message.objects.get(session_id=session_id, position=position).ui_id


def _next_attempt(session_id: str, turn_message_id: str) -> int:
    attempts = Run.objects.filter(session_id=session_id, turn_message_id=turn_message_id).values_list(
        "attempt", flat=True
    )
    return max(attempts, default=0) + 1


auser_position = sync_to_async(_user_position)
"""``await auser_position(session_id, ui_id)``: position of that user row ('' = the latest user row), or None."""
auser_id = sync_to_async(_user_id)
anext_attempt = sync_to_async(_next_attempt)
"""``await anext_attempt(session_id, turn_message_id)``: 1 + the highest attempt of the turn."""
