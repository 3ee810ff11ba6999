"""The **Stuck** filter: non-terminal runs with an expired lease or no event for ``STUCK_AFTER_SECONDS``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from helix_django.recovery.inventory import stuck_q


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
