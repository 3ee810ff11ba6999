"""List filters of the generations list: the default **Needs attention** view and **Stuck**."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from helix_django.models import ToolExecution, ToolExecutionStatus
from helix_django.models.run import RESOLUTIONS, RESOLVABLE_STATUSES
from helix_django.store.leases import stuck_q


class StuckFilter(admin.SimpleListFilter):
    """Lists exactly the stuck runs (``stuck=yes``) or every other run (``stuck=no``)."""

    title = _("stuck")
    parameter_name = "stuck"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", _("Stuck")), ("no", _("Not stuck"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet | None:
        if self.value() == "yes":
            return queryset.filter(stuck_q())
        if self.value() == "no":
            return queryset.exclude(stuck_q())
        return None


#: ``?view=`` value of the default changelist: the runs a support person should look at first.
ATTENTION = "attention"


def attention_q() -> Q:
    """Return a filter for runs that need a person: stuck, or interrupted/failed without a recorded
    resolution (:data:`~helix_django.models.run.RESOLUTIONS`), or with a tool execution whose outcome is unknown."""
    unresolved = Q(status__in=RESOLVABLE_STATUSES) & ~Q(recovery_action__in=RESOLUTIONS)
    unknown_tool = Q(pk__in=ToolExecution.objects.filter(status=ToolExecutionStatus.UNKNOWN).values("run_id"))
    return stuck_q() | unresolved | unknown_tool


class AttentionFilter(admin.SimpleListFilter):
    """The list's view: **Needs attention** (the default, ``?view=attention``) or every run (``?view=all``).

    The changelist opened with no query string redirects to the attention view
    (:meth:`RunAdmin.changelist_view`); any other filter or search given alone lists all runs.
    """

    title = _("view")
    parameter_name = "view"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [(ATTENTION, _("Needs attention")), ("all", _("All generations"))]

    def choices(self, changelist: Any) -> Any:
        # No "All" entry of its own: "all" is a lookup, so both views have a stable URL.
        for value, title in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet | None:
        if self.value() == ATTENTION:
            return queryset.filter(attention_q())
        return None
