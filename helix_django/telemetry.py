"""Structured, sanitized telemetry events for runs and recovery (000, "Observability fields").

Every event is one log record on the ``helix_django.telemetry`` logger: the message is
``"helix.<event>"`` and the record carries ``helix_event`` (the event name) and
``helix_fields`` (a dict). Only the allow-listed fields below are kept, and only as
scalars (ids, names, stages, counts, durations); anything else is dropped before it is
logged. So prompt text, assistant text, tool arguments and results, credentials and
endpoint URLs never reach a log line, whatever a caller passes::

    emit("run.interrupted", run_id="run_1", stage="streaming", partial_chars=120)
"""

from __future__ import annotations

import logging
from typing import Any

from helix_django.signals import run_finished, run_started

logger = logging.getLogger("helix_django.telemetry")

#: Field names an event may carry; each value must be a str/int/float/bool/None scalar.
ALLOWED_FIELDS = frozenset(
    {
        "run_id",
        "session_id",
        "provider",
        "model",
        "agent",
        "attempt",
        "kind",
        "status",
        "previous_status",
        "stage",
        "action",
        "outcome",
        "reason",
        "error_code",
        "duration_ms",
        "elapsed_ms",
        "partial_chars",
        "chunk_count",
        "tool_count",
        "tools_completed",
        "tools_unknown",
        "step_count",
        "has_provider_operation",
        "provider_operation_status",
        "status_attempts",
        "new_run_id",
        "scanned",
        "interrupted",
        "completed",
        "skipped",
        "actor_id",
        "tool",
    }
)
#: Longest string value kept (ids and names are shorter; anything longer is not a field value).
MAX_VALUE_CHARS = 80

EVENTS = frozenset(
    {
        "run.started",
        "run.finished",
        "run.interrupted",
        "recovery.scan",
        "recovery.action",
        "recovery.outcome",
        "tool.reconcile",
    }
)


def sanitize(fields: dict[str, Any]) -> dict[str, Any]:
    """Return only the allow-listed scalar fields of ``fields``; long strings are cut to ``MAX_VALUE_CHARS``."""
    clean: dict[str, Any] = {}
    for name, value in fields.items():
        if name not in ALLOWED_FIELDS:
            continue
        if isinstance(value, str):
            clean[name] = value[:MAX_VALUE_CHARS]
        elif value is None or isinstance(value, (bool, int, float)):
            clean[name] = value
    return clean


def emit(event: str, *, level: int = logging.INFO, **fields: Any) -> dict[str, Any]:
    """Log the telemetry ``event`` (one of :data:`EVENTS`) with sanitized ``fields`` at ``level``; return them.

    Raises ValueError for an unknown event name (a programming error, never user input).
    """
    if event not in EVENTS:
        raise ValueError(f"unknown telemetry event {event!r}")
    clean = sanitize(fields)
    logger.log(
        level,
        "helix.%s %s",
        event,
        " ".join(f"{key}={clean[key]}" for key in sorted(clean)),
        extra={"helix_event": event, "helix_fields": clean},
    )
    return clean


def run_fields(run: Any) -> dict[str, Any]:
    """Return the sanitized identity fields of a Run: ids, provider, model, attempt, status."""
    return {
        "run_id": run.id,
        "session_id": run.session_id,
        "provider": run.provider,
        "model": run.model,
        "agent": run.agent,
        "attempt": run.attempt,
        "kind": run.kind,
        "status": run.status,
        "has_provider_operation": bool(run.provider_operation_id),
    }


# Coroutine receivers: ``Signal.asend`` awaits them on the sender's loop. A plain function
# would cost the sender a hop to the ORM's thread (Django runs sync receivers of ``asend``
# through sync_to_async) just to log a line.
async def _on_run_started(sender: Any, run: Any, **kwargs: Any) -> None:
    emit("run.started", **run_fields(run))


async def _on_run_finished(sender: Any, run: Any, status: str = "", **kwargs: Any) -> None:
    fields = run_fields(run)
    if status:
        fields["status"] = status
    emit("run.finished", **fields)


def connect_signals() -> None:
    """Connect run signals to telemetry (idempotent: receivers use a dispatch uid)."""
    run_started.connect(_on_run_started, dispatch_uid="helix_telemetry_run_started")
    run_finished.connect(_on_run_finished, dispatch_uid="helix_telemetry_run_finished")
