"""Generations (runs) in the admin: list, Stuck filter, change page and recovery actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import path, reverse
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext_lazy as _

from helix_django.admin import views
from helix_django.admin.filters import StuckFilter
from helix_django.admin.texts import TITLES
from helix_django.admin.timeline import change_page_context
from helix_django.models import Run
from helix_django.recovery import inventory as inv

#: Actions offered in bulk from the changelist (each goes through a confirmation page).
BULK_ACTIONS = (inv.CHECK_STATUS, inv.MARK_INTERRUPTED, inv.CANCEL, inv.KEEP_PARTIAL, inv.DISCARD_PARTIAL)


def _bulk(action: str) -> Any:
    def bulk_action(modeladmin: RunAdmin, request: HttpRequest, queryset: QuerySet[Run]) -> Any:
        return views.bulk_confirm(modeladmin, request, queryset, action)

    bulk_action.__name__ = f"recovery_{action}"
    return admin.action(description=TITLES[action], permissions=["reconcile"])(bulk_action)


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Runs, titled "generations" for people. Read-only: only recovery actions change them."""

    list_display = (
        "id",
        "session",
        "status",
        "attempt",
        "age",
        "last_event_at",
        "provider",
        "model",
        "partial_chars",
        "tool_count",
    )
    list_select_related = ("session", "session__owner")
    list_filter = ("status", StuckFilter, "provider")

    def get_search_fields(self, request: Any) -> tuple[str, ...]:
        """Search by ids, request key, operation id and the owner's ``USERNAME_FIELD`` (any user model)."""
        owner = f"session__owner__{get_user_model().USERNAME_FIELD}"
        return ("id", "session__id", owner, "request_key", "provider_operation_id")

    ordering = ("-created_at",)
    change_form_template = "admin/helix_django/run/change_form.html"
    actions = tuple(_bulk(action) for action in BULK_ACTIONS)
    #: Never shown: provider continuation state may be opaque or encrypted (000, "Reasoning state").
    exclude = ("continuation", "input_hash")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        return super().get_queryset(request).annotate(tool_count=Count("tool_executions"))

    fieldsets = (
        (
            None,
            {"fields": ("id", "session", "status", "kind", "attempt", "turn_message_id", "agent", "provider", "model")},
        ),
        (
            _("Interruption and recovery"),
            {
                "fields": (
                    "interrupted_stage",
                    "partial_chars",
                    "recovery_action",
                    "is_continuation_valid",
                    "provider_operation_id",
                    "cancel_requested_at",
                    "provider_cancel_result",
                    "error_code",
                    "error_category",
                    "error_retryable",
                    "error_message",
                )
            },
        ),
        (
            _("Lease and timing"),
            {
                "classes": ("collapse",),
                "fields": (
                    "lease_owner",
                    "lease_expires_at",
                    "last_event_at",
                    "created_at",
                    "started_at",
                    "finished_at",
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

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Run._meta.fields if f.name not in self.exclude]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Runs change only through recovery actions (reconcile_run), never through the form.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_reconcile_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Whether the user may run recovery actions (``helix_django.reconcile_run``)."""
        return request.user.has_perm("helix_django.reconcile_run")

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, obj: Run) -> str:
        return timesince(obj.created_at, timezone.now())

    @admin.display(description=_("tools"), ordering="tool_count")
    def tool_count(self, obj: Run) -> int:
        return getattr(obj, "tool_count", 0)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/recovery/<str:action>/",
                wrap(lambda request, object_id, action: views.confirm_action(self, request, object_id, action)),
                name="helix_django_run_recovery",
            ),
            path(
                "<path:object_id>/tools/<int:execution_id>/resolve/",
                wrap(
                    lambda request, object_id, execution_id: views.resolve_tool(self, request, object_id, execution_id)
                ),
                name="helix_django_run_resolve_tool",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> Any:
        run = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if run is not None:
            extra.update(change_page_context(run))
            offers = inv.inventory(run)
            extra["recovery_actions"] = [
                {
                    "action": action,
                    "title": TITLES[action],
                    "is_available": offers[action].is_available,
                    "reason": offers[action].reason,
                    "url": reverse("admin:helix_django_run_recovery", args=[run.pk, action]),
                }
                for action in inv.ACTIONS
            ]
            extra["can_reconcile"] = self.has_reconcile_permission(request)
            extra["blocking_tool_ids"] = {e.pk for e in inv.blocking_tools(extra["tool_executions"])}
        return super().change_view(request, object_id, form_url, extra_context=extra)
