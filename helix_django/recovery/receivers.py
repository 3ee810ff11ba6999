"""Signal receivers of recovery and telemetry, connected once from ``AppConfig.ready()`` (no queries there)."""

from __future__ import annotations

from typing import Any


def _invalidate_stale_continuations(sender: Any, run: Any, **kwargs: Any) -> None:
    from helix_django.recovery.inventory import invalidate_stale_continuations

    invalidate_stale_continuations(run.session_id)


def connect() -> None:
    """Connect the receivers (idempotent: dispatch uids)."""
    from helix_django import telemetry
    from helix_django.signals import run_started

    telemetry.connect_signals()
    run_started.connect(_invalidate_stale_continuations, dispatch_uid="helix_recovery_invalidate_continuations")
