"""Confirmation pages of the recovery actions; POST performs, logs admin history, reports.

Every page says what will happen (``texts.EFFECTS``) and, when the action does not apply,
why. Performing needs ``helix_django.reconcile_run`` (403 otherwise) and writes a
``LogEntry`` change message naming the action and its outcome.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import connections, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from helix_django.admin.display import run_url
from helix_django.admin.texts import EFFECTS, TITLES
from helix_django.admin.timeline import shown_chars
from helix_django.conf import helix_settings
from helix_django.errors import HelixError, ValidationError
from helix_django.jsonbody import load_json
from helix_django.models import Run, ToolExecution, ToolExecutionStatus
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform, aresolve_tool
from helix_django.runtime.executor import get_executor
from helix_django.store import leases


def outside_request_transactions(view: Any) -> Any:
    """Exempt the view function ``view`` from every database's ``ATOMIC_REQUESTS``; return it.

    A recovery action ends a live run: it asks the run's task to end and waits for that task
    to commit its ending on another thread. Inside a request transaction holding the
    database's write lock, that wait lasted until the lock timed out (15 s) and the run was
    still live after it. Helix's store commits its own transactions, so the views that
    perform actions run outside the host's request transactions (``transaction.non_atomic_requests``
    on every alias), as helix's REST views do.
    """
    for alias in connections:
        view = transaction.non_atomic_requests(using=alias)(view)
    return view


def _change_url(run: Run) -> str:
    return run_url("change", run.pk)


def _context(modeladmin: Any, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.model._meta,
        "app_label": modeladmin.model._meta.app_label,
        **extra,
    }


#: Live runs whose text so far a confirmation page counts (each is a read of the run's stream);
#: the others are listed as still being written. An ended run's count is a column (no read).
LIVE_TEXT_COUNTS = 20


@dataclasses.dataclass(frozen=True)
class _Row:
    """One run of a confirmation page, as the template lists it."""

    run: Run
    chars: int | None
    """Characters shown so far (live) or kept (ended); None: a live run past :data:`LIVE_TEXT_COUNTS`."""
    is_running: bool = False
    """Mark interrupted on a run whose process still renews its lease (it is not stuck)."""
    refusal: str = ""
    """Why the action will be refused for this run (bulk pages)."""


def _rows(runs: list[Run], action: str, offers: dict[str, inv.Availability] | None) -> list[_Row]:
    """The page's rows: at most :data:`LIVE_TEXT_COUNTS` stream reads, however many runs are selected."""
    rows, counted = [], 0
    for run in runs:
        chars: int | None = run.partial_chars
        if run.is_live:
            chars = shown_chars(run) if counted < LIVE_TEXT_COUNTS else None
            counted += 1
        offer = offers.get(run.pk) if offers is not None else None
        refusal = str(offer.reason) if offer is not None and not offer.is_available else ""
        running = action == inv.MARK_INTERRUPTED and _is_healthy(run)
        rows.append(_Row(run, chars, running, refusal))
    return rows


def _confirm_page(
    modeladmin: Any,
    request: HttpRequest,
    action: str,
    runs: list[Run],
    offers: dict[str, inv.Availability] | None = None,
    **extra: Any,
) -> HttpResponse:
    """Render the confirmation page of ``action`` on ``runs`` (one run's page, or the changelist's bulk page).

    ``offers``: each run's availability of ``action`` (bulk pages list the runs it will be refused for).
    """
    rows = _rows(runs, action, offers)
    return TemplateResponse(
        request,
        "admin/helix_django/run/confirm_action.html",
        _context(
            modeladmin,
            request,
            title=_("%(title)s: are you sure?") % {"title": TITLES[action]},
            action=action,
            action_title=TITLES[action],
            effect=EFFECTS[action],
            runs=runs,
            rows=rows,
            running_count=sum(row.is_running for row in rows),
            **extra,
        ),
    )


def _is_healthy(run: Run) -> bool:
    """Whether ``run`` is live and its process still renews its lease (it is not stuck)."""
    return run.is_live and not leases.is_lease_expired(run)


def _perform(modeladmin: Any, request: HttpRequest, run: Run, action: str) -> HelixError | None:
    """Perform ``action`` on ``run`` and log it; return its typed refusal (None: done)."""
    try:
        # A generation started here runs on the executor's own loop; the request does not wait for it.
        result = async_to_sync(aperform)(action, run.pk, executor=get_executor(), actor_id=request.user.pk)
    except HelixError as exc:
        return exc
    note = f"Recovery action: {TITLES[action]} -> {result.outcome}"
    if result.new_run_id:
        note += f" (new generation {result.new_run_id})"
    modeladmin.log_change(request, Run.objects.get(pk=run.pk), note)
    return None


#: Run ids a bulk action's refusal message names per reason (the rest are counted).
REFUSED_IDS_SHOWN = 5


def _report_refusals(modeladmin: Any, request: HttpRequest, action: str, refused: dict[str, list[str]]) -> None:
    """One error message per refusal reason (``refused``: reason -> run ids), however many runs it refused."""
    for reason, run_ids in refused.items():
        shown = ", ".join(run_ids[:REFUSED_IDS_SHOWN]) + (", …" if len(run_ids) > REFUSED_IDS_SHOWN else "")
        if len(run_ids) == 1:
            text = _("%(title)s was refused for %(run)s: %(reason)s") % {
                "title": TITLES[action],
                "run": shown,
                "reason": reason,
            }
        else:
            text = _("%(title)s was refused for %(count)d generations (%(runs)s): %(reason)s") % {
                "title": TITLES[action],
                "count": len(run_ids),
                "runs": shown,
                "reason": reason,
            }
        modeladmin.message_user(request, text, messages.ERROR)


def confirm_action(modeladmin: Any, request: HttpRequest, object_id: str, action: str) -> HttpResponse:
    """GET: the confirmation page of ``action`` on one run. POST: perform it."""
    run = modeladmin.get_object(request, unquote(object_id))
    if run is None or action not in inv.ACTIONS:
        raise Http404
    if not modeladmin.has_view_permission(request, run):
        raise PermissionDenied
    if request.method == "POST":
        if not modeladmin.has_reconcile_permission(request, run):
            raise PermissionDenied
        refusal = _perform(modeladmin, request, run, action)
        if refusal is not None:
            _report_refusals(modeladmin, request, action, {refusal.message: [run.pk]})
        else:
            modeladmin.message_user(
                request, _("%(title)s done for %(run)s.") % {"title": TITLES[action], "run": run.pk}
            )
        return HttpResponseRedirect(_change_url(run))
    return _confirm_page(
        modeladmin,
        request,
        action,
        [run],
        offer=inv.inventory(run)[action],
        original=run,
        can_reconcile=modeladmin.has_reconcile_permission(request, run),
        change_url=_change_url(run),
    )


def bulk_confirm(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Run], action: str) -> HttpResponse | None:
    """The changelist action: a confirmation page first, then ``action`` on every selected run.

    A selection of more than ``HELIX["ADMIN_BULK_MAX_RUNS"]`` runs (the changelist's "select
    all") is refused with one error message, on the page and on its POST, and nothing is
    done: one request performs a bounded number of recoveries (each a transaction, *Check
    status* a provider call). Refusals are reported once per reason.
    """
    limit = helix_settings.ADMIN_BULK_MAX_RUNS
    selected = queryset.count()
    if selected > limit:
        modeladmin.message_user(
            request,
            _(
                "%(title)s acts on at most %(limit)d generations at once; %(count)d were selected. "
                "Nothing was done: narrow the selection with the filters or the search."
            )
            % {"title": TITLES[action], "limit": limit, "count": selected},
            messages.ERROR,
        )
        return None
    runs = list(queryset)
    if request.POST.get("confirm") == "yes":
        refused: dict[str, list[str]] = {}
        for run in runs:
            refusal = _perform(modeladmin, request, run, action)
            if refusal is not None:
                refused.setdefault(refusal.message, []).append(run.pk)
        _report_refusals(modeladmin, request, action, refused)
        done = len(runs) - sum(len(run_ids) for run_ids in refused.values())
        modeladmin.message_user(
            request, _("%(title)s done for %(count)d generation(s).") % {"title": TITLES[action], "count": done}
        )
        return None
    return _confirm_page(
        modeladmin,
        request,
        action,
        runs,
        offers={run.pk: inv.inventory(run)[action] for run in runs},
        is_bulk=True,
        bulk_action_name=f"recovery_{action}",
        can_reconcile=True,
    )


def resolve_tool(modeladmin: Any, request: HttpRequest, object_id: str, execution_id: int) -> HttpResponse:
    """Resolve a tool execution whose outcome is unknown: mark executed (with its result) or not executed."""
    run = modeladmin.get_object(request, unquote(object_id))
    execution = ToolExecution.objects.filter(pk=execution_id, run_id=run.pk if run else None).first()
    if run is None or execution is None:
        raise Http404
    if not modeladmin.has_view_permission(request, run):
        raise PermissionDenied
    error = ""
    if request.method == "POST":
        if not modeladmin.has_reconcile_permission(request, run):
            raise PermissionDenied
        choice = request.POST.get("outcome")
        result: Any = None
        if choice == "executed":
            try:
                result = load_json(request.POST.get("result") or "null")
            except ValidationError as exc:
                # Not JSON, or nested deeper than the parser goes; a NUL is told as such.
                error = exc.message if exc.cause == "nul_character" else _("The result must be valid JSON.")
        elif choice != "not_executed":
            error = _("Choose whether the tool ran.")
        if not error:
            try:
                async_to_sync(aresolve_tool)(
                    execution.pk, executed=choice == "executed", result=result, actor_id=request.user.pk
                )
            except HelixError as exc:
                error = exc.message
            else:
                label = _("executed") if choice == "executed" else _("not executed")
                modeladmin.log_change(request, run, f"Tool execution {execution.name} ({execution.pk}) marked {label}")
                modeladmin.message_user(
                    request, _("Tool %(name)s marked %(label)s.") % {"name": execution.name, "label": label}
                )
                return HttpResponseRedirect(_change_url(run))
    return TemplateResponse(
        request,
        "admin/helix_django/run/resolve_tool.html",
        _context(
            modeladmin,
            request,
            title=_("Resolve tool execution %(name)s") % {"name": execution.name},
            original=run,
            execution=execution,
            is_unknown=execution.status == ToolExecutionStatus.UNKNOWN,
            error=error,
            can_reconcile=modeladmin.has_reconcile_permission(request, run),
            change_url=_change_url(run),
        ),
        status=400 if error else 200,
    )
