"""Read-only admins for messages, checkpoints, tool executions and stream chunks (STYLE, "Admin")."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from helix_django.models import Checkpoint, Message, StreamChunk, ToolExecution


class ReadOnlyAdmin(admin.ModelAdmin):
    """An admin that shows records and never changes them (they are written by the store only)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    """Committed (and archived) conversation rows."""

    list_display = ("id", "session", "position", "role", "ui_id", "run", "archived_at", "created_at")
    list_select_related = ("session", "run")
    list_filter = ("role",)
    search_fields = ("session__id", "ui_id", "run__id")


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    """Durable states of sessions at a stream sequence."""

    list_display = ("id", "session", "run", "kind", "message_count", "stream_sequence", "step_count", "created_at")
    list_select_related = ("session", "run")
    list_filter = ("kind",)
    search_fields = ("session__id", "run__id")


@admin.register(ToolExecution)
class ToolExecutionAdmin(ReadOnlyAdmin):
    """Tool executions with effect class, idempotency key and status."""

    list_display = ("id", "name", "run", "effect", "status", "idempotency_key", "step", "started_at", "finished_at")
    list_select_related = ("run",)
    list_filter = ("status", "effect")
    search_fields = ("run__id", "tool_call_id", "idempotency_key", "name")
    exclude = ("arguments", "result")


@admin.register(StreamChunk)
class StreamChunkAdmin(ReadOnlyAdmin):
    """Chunks stored by the database stream manager (no payload in the list)."""

    list_display = ("stream_id", "sequence", "type", "run_id", "attempt_id", "step")
    list_filter = ("type",)
    search_fields = ("stream_id", "run_id")
    exclude = ("payload",)
