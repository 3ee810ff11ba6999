"""How the admin shows a run's status, times and durations to support staff at a glance.

A status is a badge: a colour class per status family (``ok``, ``live``, ``attention``,
``muted``) and the status text, so colour is never the only signal. A time is shown to the
second in the site's time zone with the elapsed time beside it ("14:03:07 · 12 s ago"),
the full ISO time in the ``title`` (hover) and a ``<time datetime>`` for machines.
"""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from helix_django import pricing
from helix_django.models import ChatSession, RunStatus

#: Badge colour family of each status: ``attention`` needs a person, ``live`` is running.
STATUS_FAMILY: dict[str, str] = {
    RunStatus.STARTING: "live",
    RunStatus.STREAMING: "live",
    RunStatus.TOOLING: "live",
    RunStatus.SUSPENDED_CLIENT_TOOL: "live",
    RunStatus.RECOVERING: "live",
    RunStatus.INTERRUPTED: "attention",
    RunStatus.FAILED: "attention",
    RunStatus.COMPLETED: "ok",
    RunStatus.CANCELLED: "muted",
    RunStatus.SUPERSEDED: "muted",
}


def status_badge(status: str, label: str, *, is_stuck: bool = False) -> SafeString:
    """Return ``<span class="helix-badge helix-badge-<family>" data-status=...>label</span>``.

    A stuck live run gets the ``attention`` colour and the word "stuck" after its status.
    """
    family = "attention" if is_stuck else STATUS_FAMILY.get(status, "muted")
    text = f"{label} · {_('stuck')}" if is_stuck else label
    return format_html('<span class="helix-badge helix-badge-{}" data-status="{}">{}</span>', family, status, text)


def duration(seconds: float) -> str:
    """Return a short duration: ``"850 ms"``, ``"12.4 s"``, ``"3 min 05 s"``, ``"2 h 04 min"``."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def local(value: datetime) -> datetime:
    """Return ``value`` in the current time zone; a naive one (a site with ``USE_TZ = False``) as it is."""
    return timezone.localtime(value) if timezone.is_aware(value) else value


def exact(value: datetime) -> str:
    """Return ``value`` in the current time zone to the second: ``"2026-12-01 09:08:13 UTC"``."""
    local_value = local(value)
    return f"{local_value:%Y-%m-%d %H:%M:%S} {local_value.tzname() or ''}".rstrip()


def timestamp(value: datetime | None, *, now: datetime | None = None, short: bool = False) -> SafeString | str:
    """Return a ``<time>`` element: the time to the second and how long ago; the full time on hover.

    ``short`` shows only the elapsed time (list columns); "—" for None.
    """
    if value is None:
        return "—"
    now = now or timezone.now()
    ago = _("%(duration)s ago") % {"duration": duration(max(0.0, (now - value).total_seconds()))}
    full = exact(value)
    shown = ago if short else f"{full} · {ago}"
    return format_html('<time datetime="{}" title="{}">{}</time>', value.isoformat(), full, shown)


def short_id(value: str) -> str:
    """Return ``run_ab12…9f3e01`` for a long id (the full id goes in the ``title``)."""
    return value if len(value) <= 16 else f"{value[:7]}…{value[-6:]}"


def session_title(session: ChatSession) -> SafeString:
    """Return the session's title (or "Untitled" and its short id), the full title and id on hover."""
    shown = session.title or _("Untitled · %(id)s") % {"id": short_id(session.id)}
    return format_html('<span class="helix-title" title="{} ({})">{}</span>', session.title, session.id, shown)


def owner(session: ChatSession) -> str:
    """Return the owner's username (``USERNAME_FIELD``), or "anonymous" for a visitor's session."""
    return session.owner.get_username() if session.owner is not None else _("anonymous")


def run_url(view: str, run_id: str, *args: object) -> str:
    """Return the admin URL of a run's page ``view`` (``change``, ``recovery``, ...) with the id as displayed.

    Django's admin quotes a primary key in its URLs (``_`` -> ``_5F``); the run pages take
    the id as is, and still open links quoted that way (``RunAdmin.get_object``).
    """
    return reverse(f"admin:helix_django_run_{view}", args=[run_id, *args])


def run_link(run_id: str) -> SafeString | str:
    """Return a link to a run's page showing its short id (the full id on hover); "—" for ''."""
    if not run_id:
        return "—"
    return format_html(
        '<a class="helix-run-link" href="{}" title="{}">{}</a>', run_url("change", run_id), run_id, short_id(run_id)
    )


def tokens(usage: dict | None) -> str:
    """Return a run's (or a sum of runs') usage as "10 in · 240 out" plus "(40 estimated)"; "—" without usage.

    ``usage``: a ``Run.usage`` record (:mod:`helix_django.usage`) or a sum of them.
    """
    if not usage:
        return "—"
    text = _("%(input)s in · %(output)s out") % {
        "input": usage.get("inputTokens", 0),
        "output": usage.get("outputTokens", 0),
    }
    estimated = usage.get("estimatedTokens", 0)
    return text + " " + _("(%(count)s estimated)") % {"count": estimated} if estimated else text


def summed_usage(records: list[dict]) -> dict[str, int]:
    """Return ``records`` (``Run.usage``) added up: ``{inputTokens, outputTokens, estimatedTokens}``; {} for none."""
    keys = ("inputTokens", "outputTokens", "estimatedTokens")
    total = {key: sum(int((record or {}).get(key, 0)) for record in records) for key in keys}
    return total if any(total.values()) else {}


def cost(model: str, usage: dict | None) -> str:
    """Return what a run's ``usage`` of ``model`` cost, "0.000416 USD" (``HELIX["MODEL_PRICES"]``); "—" unpriced."""
    return pricing.format_costs(pricing.add_costs([pricing.run_cost(model, usage)])) or "—"


def runs_cost(runs: list[tuple[str, dict | None]]) -> str:
    """Return what ``(model, usage)`` runs cost, summed per currency; "—" when none is priced.

    Unpriced runs are left out of the sum and named: "0.02 USD (3 runs unpriced)".
    """
    costs = [pricing.run_cost(model, usage) for model, usage in runs]
    text = pricing.format_costs(pricing.add_costs(costs))
    unpriced = sum(1 for (_, usage), one in zip(runs, costs, strict=True) if usage and one is None)
    if text and unpriced:
        return (
            text
            + " "
            + ngettext("(%(count)s run unpriced)", "(%(count)s runs unpriced)", unpriced) % {"count": unpriced}
        )
    return text or "—"
