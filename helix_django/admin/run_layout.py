"""The run's layout in the admin: the change page's field groups and display methods, and the usage columns.

:class:`RunUsageColumns` gives a run's tokens and cost to every admin that shows runs (the
runs list and page, the session page's attempts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from helix_django.admin import display
from helix_django.models import Run

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


class RunUsageColumns:
    """Display methods of a run's usage: ``tokens`` and ``cost`` (read-only, for ModelAdmin and inlines)."""

    @admin.display(description=_("tokens"))
    def tokens(self, obj: Run) -> str:
        """What the run's model calls cost, estimated tokens named (helix_django/usage.py)."""
        return display.tokens(obj.usage)

    @admin.display(description=_("cost"))
    def cost(self, obj: Run) -> str:
        """What the run's tokens cost at its model's price (helix_django/pricing.py)."""
        return display.cost(obj.model, obj.usage)
