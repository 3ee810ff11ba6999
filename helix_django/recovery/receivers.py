"""Signal receivers of recovery and telemetry, connected once from ``AppConfig.ready()`` (no queries there)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async


async def _on_run_started(sender: Any, run: Any, **kwargs: Any) -> None:
    from helix_django.recovery.inventory import invalidate_stale_continuations

    await sync_to_async(invalidate_stale_continuations)(run.session_id)


def _on_run_started_sync(sender: Any, run: Any, **kwargs: Any) -> None:
    from helix_django.recovery.inventory import invalidate_stale_continuations

    invalidate_stale_continuations(run.session_id)


def connect() -> None:
    """Connect the receivers (idempotent: dispatch uids)."""
    from helix_django import telemetry
    from helix_django.signals import run_started

    telemetry.connect_signals()
    run_started.connect(_on_run_started_sync, dispatch_uid="helix_recovery_invalidate_continuations")
