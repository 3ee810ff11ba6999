"""Generations (runs) in the admin: list, Stuck filter, change page and recovery actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Case, Count, Model, QuerySet, Value, When
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from helix_django.admin import causes, dashboard, display, views
from helix_django.admin.filters import ATTENTION, AttentionFilter, StuckFilter
from helix_django.admin.run_layout import DETAIL_DISPLAYS, FIELDSETS, RunUsageColumns
from helix_django.admin.texts import TITLES
from helix_django.admin.timeline import change_page_context
from helix_django.models import Run
from helix_django.recovery import inventory as inv
from helix_django.store import leases

#: Actions offered in bulk from the changelist (each goes through a confirmation page).
BULK_ACTIONS = (inv.CHECK_STATUS, inv.MARK_INTERRUPTED, inv.CANCEL, inv.KEEP_PARTIAL, inv.DISCARD_PARTIAL)


def _bulk(action: str) -> Any:
    def bulk_action(modeladmin: RunAdmin, request: HttpRequest, queryset: QuerySet[Run]) -> Any:
        return views.bulk_confirm(modeladmin, request, queryset, action)

    bulk_action.__name__ = f"recovery_{action}"
    return admin.action(description=TITLES[action], permissions=["reconcile"])(bulk_action)


class RunChangeList(ChangeList):
    """The generations list, linking each run's page with its id as displayed (no ``_5F``)."""

    def url_for_result(self, result: Model) -> str:
        return display.run_url("change", str(result.pk))


@admin.register(Run)
class RunAdmin(RunUsageColumns, admin.ModelAdmin):
    """Runs, titled "generations" for people. Read-only: only recovery actions change them."""

    list_display = (
        "status_badge",
        "short_id",
        "session_title",
        "owner",
        "last_event",
        "age",
        "attempt",
        "partial_output",
        "tool_count",
    )
    list_display_links = ("short_id",)
    list_select_related = ("session", "session__owner")
    list_filter = (AttentionFilter, "status", StuckFilter, "provider")
    ordering = ("-created_at",)
    change_form_template = "admin/helix_django/run/change_form.html"
    change_list_template = "admin/helix_django/run/change_list.html"
    actions = tuple(_bulk(action) for action in BULK_ACTIONS)
    #: Never shown: provider continuation state may be opaque or encrypted (000, "Reasoning state").
    exclude = ("continuation", "input_hash", "usage")

    class Media:
        css = {"all": ("helix_django/admin.css",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        stuck = Case(When(leases.stuck_q(), then=Value(True)), default=Value(False), output_field=BooleanField())
        return super().get_queryset(request).annotate(tool_count=Count("tool_executions"), is_stuck=stuck)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return RunChangeList

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Run | None:
        """The run of a URL that names its id as displayed, or quoted the way Django's admin quotes it.

        Django hands ``object_id`` unquoted (``_XX`` read as an escaped character), so a run id
        like ``run_40ff…`` read that way names another run: the id in the URL as it is comes first.
        """
        match = getattr(request, "resolver_match", None)
        as_given = match.kwargs.get("object_id") if match is not None else None
        if as_given and as_given != object_id and from_field is None:
            run = super().get_object(request, as_given)
            if run is not None:
                return run
        return super().get_object(request, object_id, from_field)

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        """Ids, request key, operation id, and the owner by the user model's ``USERNAME_FIELD``."""
        owner = f"session__owner__{get_user_model().USERNAME_FIELD}"
        return ("id", "session__id", "session__title", owner, "request_key", "provider_operation_id")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        """Open on the **Needs attention** view when no filter, search or ordering is given."""
        if request.method == "GET" and not request.GET:
            return HttpResponseRedirect(f"{request.path}?{AttentionFilter.parameter_name}={ATTENTION}")
        return super().changelist_view(request, extra_context)

    fieldsets = FIELDSETS

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Run._meta.fields if f.name not in self.exclude] + list(DETAIL_DISPLAYS)

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

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, obj: Run) -> str:
        return display.status_badge(obj.status, obj.get_status_display(), is_stuck=getattr(obj, "is_stuck", False))

    @admin.display(description=_("generation"), ordering="id")
    def short_id(self, obj: Run) -> str:
        return format_html('<span class="helix-id" title="{}">{}</span>', obj.id, display.short_id(obj.id))

    @admin.display(description=_("conversation"), ordering="session__title")
    def session_title(self, obj: Run) -> str:
        return display.session_title(obj.session)

    @admin.display(description=_("owner"), ordering="session__owner")
    def owner(self, obj: Run) -> str:
        return display.owner(obj.session)

    @admin.display(description=_("last event"), ordering="last_event_at")
    def last_event(self, obj: Run) -> str:
        return display.timestamp(obj.last_event_at, short=True)

    @admin.display(description=_("age"), ordering="created_at")
    def age(self, obj: Run) -> str:
        return display.timestamp(obj.created_at, short=True)

    @admin.display(description=_("partial chars"), ordering="partial_chars")
    def partial_output(self, obj: Run) -> str:
        """The stored partial size of an ended run; a live run's text is still growing (see its page)."""
        if obj.is_live:
            return format_html('<span title="{}">{}</span>', _("still being written: open it to see the text"), "…")
        return str(obj.partial_chars) if obj.partial_chars else "—"

    @admin.display(description=_("error"))
    def error_summary(self, obj: Run) -> str:
        """The scrubbed error (code, category, whether retrying may help), or "—" for a run without one."""
        if not obj.error_code:
            return "—"
        retry = _("retrying may help") if obj.error_retryable else _("retrying will not help")
        parts = [obj.error_code, obj.error_category, retry, obj.error_message]
        return " · ".join(str(p) for p in parts if p)

    @admin.display(description=_("cause"))
    def cause(self, obj: Run) -> str:
        return causes.cause_html(obj) or "—"

    @admin.display(description=_("resolution"))
    def resolution(self, obj: Run) -> str:
        return causes.resolution_html(obj) or "—"

    @admin.display(description=_("lease expires"))
    def lease_expires(self, obj: Run) -> str:
        return display.timestamp(obj.lease_expires_at)

    @admin.display(description=_("last event"))
    def last_event_exact(self, obj: Run) -> str:
        return display.timestamp(obj.last_event_at)

    @admin.display(description=_("created"))
    def created(self, obj: Run) -> str:
        return display.timestamp(obj.created_at)

    @admin.display(description=_("started"))
    def started(self, obj: Run) -> str:
        return display.timestamp(obj.started_at)

    @admin.display(description=_("finished"))
    def finished(self, obj: Run) -> str:
        return display.timestamp(obj.finished_at)

    @admin.display(description=_("cancel requested"))
    def cancel_requested(self, obj: Run) -> str:
        return display.timestamp(obj.cancel_requested_at)

    @admin.display(description=_("tools"), ordering="tool_count")
    def tool_count(self, obj: Run) -> int:
        return getattr(obj, "tool_count", 0)

    #: The URL names of the views that perform recovery actions (the changelist runs the bulk ones).
    ACTION_URL_NAMES = frozenset(
        {"helix_django_run_recovery", "helix_django_run_resolve_tool", "helix_django_run_changelist"}
    )

    def get_urls(self) -> list[Any]:
        """The admin's URLs, plus the dashboard, the recovery and the tool-resolution pages.

        The views that perform recovery actions run outside the host's request transactions
        (:func:`helix_django.admin.views.outside_request_transactions`).
        """
        urls = self._urls()
        for pattern in urls:
            if getattr(pattern, "name", None) in self.ACTION_URL_NAMES:
                views.outside_request_transactions(pattern.callback)
        return urls

    def _urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name="helix_django_run_dashboard"),
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

    def dashboard_view(self, request: HttpRequest) -> TemplateResponse:
        """The operations dashboard (view permission on runs)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        extra = {**self.admin_site.each_context(request), "opts": self.model._meta, "title": _("Generations dashboard")}
        return TemplateResponse(request, "admin/helix_django/run/dashboard.html", {**extra, **dashboard.context()})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> Any:
        run = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if run is not None:
            extra.update(change_page_context(run))
            offers = inv.inventory(run)
            actions = [
                {
                    "action": action,
                    "title": TITLES[action],
                    "is_available": offers[action].is_available,
                    "reason": offers[action].reason,
                    "url": display.run_url("recovery", run.pk, action),
                    "is_disruptive": action == inv.MARK_INTERRUPTED and not leases.is_lease_expired(run),
                }
                for action in inv.ACTIONS
            ]
            # The actions that can be taken first, each group in the order of ``inv.ACTIONS``.
            extra["recovery_actions"] = sorted(actions, key=lambda offer: not offer["is_available"])
            extra.update(causes.page_context(run))
            extra["can_reconcile"] = self.has_reconcile_permission(request)
            extra["is_live"] = run.is_live
            extra["status_badge"] = self.status_badge(run)
            extra["blocking_tool_ids"] = {e.pk for e in inv.blocking_tools(extra["tool_executions"])}
        return super().change_view(request, object_id, form_url, extra_context=extra)
