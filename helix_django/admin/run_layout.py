"""The run change page's layout: its field groups and the display methods it shows (read-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

#: Display methods of the change page (read-only fields that format a stored value for people).
DETAIL_DISPLAYS = (
    "status_badge",
    "tokens",
    "cost",
    "cause",
    "resolution",
    "partial_output",
    "error_summary",
    "cancel_requested",
    "lease_expires",
    "last_event_exact",
    "created",
    "started",
    "finished",
)
FIELDSETS: _FieldsetSpec = (
    (
        None,
        {
            "fields": (
                "id",
                "session",
                "status_badge",
                "kind",
                "attempt",
                "turn_message_id",
                "agent",
                "provider",
                "model",
                "tokens",
                "cost",
            )
        },
    ),
    (
        _("Interruption and recovery"),
        {
            "fields": (
                "interrupted_stage",
                "partial_output",
                "cause",
                "resolution",
                "is_continuation_valid",
                "provider_operation_id",
                "cancel_requested",
                "cancelled_by",
                "provider_cancel_result",
                "error_summary",
            )
        },
    ),
    (
        _("Lease and timing"),
        {
            "classes": ("collapse",),
            "fields": (
                "lease_owner",
                "lease_expires",
                "last_event_exact",
                "created",
                "started",
                "finished",
            ),
        },
    ),
    (
        _("Stream and conversation"),
        {
            "classes": ("collapse",),
            "fields": ("request_key", "start_message_count", "start_sequence", "response_message_id", "step_count"),
        },
    ),
)
