"""Signal receivers of recovery and telemetry, connected once from ``AppConfig.ready()`` (no queries there)."""

from __future__ import annotations

from typing import Any

from helix_django import telemetry
from helix_django.orm import sync_to_async
from helix_django.recovery.inventory import invalidate_stale_continuations
from helix_django.signals import run_started


async def _invalidate_stale_continuations(sender: Any, run: Any, rewrote_history: bool = True, **kwargs: Any) -> None:
    """Only a start that rewrote history can make older runs' continuations stale (no hop for a plain send)."""
    if rewrote_history:
        await sync_to_async(invalidate_stale_continuations)(run.session_id)


def connect() -> None:
    """Connect the receivers (idempotent: dispatch uids)."""
    telemetry.connect_signals()
    run_started.connect(_invalidate_stale_continuations, dispatch_uid="helix_recovery_invalidate_continuations")
