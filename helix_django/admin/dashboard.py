"""The operations dashboard of the admin: runs by status, the last 24 h, stuck runs, rates, latency.

Everything is read with a bounded number of queries: counts are aggregated in the
database; time to first token and chunks per minute come from the stored chunks' store
times (``_at``) of at most :data:`SAMPLE_RUNS` recent runs (one bounded stream read each).
Charts are server-side SVG (no script, no CDN); each bar links to the filtered list.
"""

from __future__ import annotations

import dataclasses
import statistics
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.db.models import Count
from django.db.models.functions import TruncHour
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from helix_django.admin.display import STATUS_FAMILY, duration, local
from helix_django.admin.filters import ATTENTION, attention_q
from helix_django.admin.spend import DAYS, spend, spend_per_day
from helix_django.admin.timeline import TOKEN_TYPES
from helix_django.errors import HelixError
from helix_django.models import Run, RunStatus
from helix_django.models.run import LIVE_STATUSES, RESOLUTIONS, RESOLVABLE_STATUSES
from helix_django.store.leases import stuck_q
from helix_django.streams import get_stream_manager
from helix_django.streams.writer import WRITTEN_AT_KEY

#: Recent runs whose chunks are read for time to first token and chunks per minute.
SAMPLE_RUNS = 40
#: Chunks read per sampled run (enough for its first token and a minute of text).
SAMPLE_CHUNKS = 2000
#: Fill colour of each badge family (the same families as the list's badges).
COLOURS = {"ok": "#43a047", "live": "#1e88e5", "attention": "#e53935", "muted": "#9e9e9e"}
STATUS_ORDER = [s.value for s in RunStatus]


@dataclasses.dataclass
class Dashboard:
    """What the dashboard page shows; counts are ``{status: n}``; rates are fractions 0..1."""

    now: datetime
    live: dict[str, int]
    day: dict[str, int]
    hourly: list[tuple[datetime, dict[str, int]]]
    stuck: int
    needs_attention: int
    """Runs that still need a person now (the list's "Needs attention" view): resolved ones are not counted."""
    unresolved: dict[str, int]
    """Interrupted and failed runs of the last 24 h without a recorded resolution, ``{status: n}``."""
    interrupted_rate: float | None
    failed_rate: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    ttft_samples: int
    chunks_per_minute: list[int]


def _list_url(**params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"view": "all", **params}.items())
    return f"{reverse('admin:helix_django_run_changelist')}?{query}"


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _sample(now: datetime) -> tuple[list[float], list[int]]:
    """Return (times to first token in seconds, chunks stored per minute over the last hour) from recent runs."""
    runs = list(
        Run.objects.filter(created_at__gte=now - timedelta(hours=24))
        .order_by("-created_at")
        .only("id", "session_id", "start_sequence", "started_at", "created_at")[:SAMPLE_RUNS]
    )
    manager = get_stream_manager()
    hour_ago_ms = int((now - timedelta(hours=1)).timestamp() * 1000)
    minutes = [0] * 60
    ttfts: list[float] = []
    for run in runs:
        try:
            chunks, _info = async_to_sync(manager.read_after)(run.session_id, run.start_sequence, limit=SAMPLE_CHUNKS)
        except HelixError:
            continue
        own = [c for _s, c in chunks if c.get("_run") == run.id and isinstance(c.get(WRITTEN_AT_KEY), int)]
        first = next((c[WRITTEN_AT_KEY] for c in own if c.get("type") in TOKEN_TYPES), None)
        if first is not None:
            started = (run.started_at or run.created_at).timestamp()
            ttfts.append(max(0.0, first / 1000 - started))
        for chunk in own:
            minute = (chunk[WRITTEN_AT_KEY] - hour_ago_ms) // 60_000
            if minute >= 0:
                minutes[min(minute, 59)] += 1  # a chunk stored while this page was read counts in the last minute
    return ttfts, minutes


def build(now: datetime | None = None) -> Dashboard:
    """Read the dashboard's numbers (a few aggregate queries plus :data:`SAMPLE_RUNS` stream reads)."""
    now = now or timezone.now()
    since = now - timedelta(hours=24)
    live = dict(Run.objects.filter(status__in=LIVE_STATUSES).values_list("status").annotate(n=Count("id")).order_by())
    recent = Run.objects.filter(created_at__gte=since)
    day = dict(recent.values_list("status").annotate(n=Count("id")).order_by())
    rows = recent.annotate(hour=TruncHour("created_at")).values_list("hour", "status").annotate(n=Count("id"))
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    hours = [start + timedelta(hours=i) for i in range(24)]
    by_hour: dict[datetime, dict[str, int]] = {h: {} for h in hours}
    for hour, status, n in rows.order_by():
        if timezone.is_aware(hour):  # USE_TZ: in the zone of ``now``; naive values are compared as they are
            hour = hour.astimezone(start.tzinfo)
        key = hour.replace(minute=0, second=0, microsecond=0)
        if key in by_hour:
            by_hour[key][status] = n
    ended = sum(n for s, n in day.items() if s not in LIVE_STATUSES)
    open_runs = recent.filter(status__in=RESOLVABLE_STATUSES).exclude(recovery_action__in=RESOLUTIONS)
    unresolved = dict(open_runs.values_list("status").annotate(n=Count("id")).order_by())
    ttfts, minutes = _sample(now)
    return Dashboard(
        now=now,
        live=live,
        day=day,
        hourly=[(h, by_hour[h]) for h in hours],
        stuck=Run.objects.filter(stuck_q(now)).count(),
        needs_attention=Run.objects.filter(attention_q()).count(),
        unresolved=unresolved,
        interrupted_rate=day.get(RunStatus.INTERRUPTED, 0) / ended if ended else None,
        failed_rate=day.get(RunStatus.FAILED, 0) / ended if ended else None,
        ttft_p50=_percentile(ttfts, 0.5),
        ttft_p95=_percentile(ttfts, 0.95),
        ttft_samples=len(ttfts),
        chunks_per_minute=minutes,
    )


def status_bars(counts: dict[str, int], *, width: int = 420) -> SafeString:
    """Return an SVG of horizontal bars, one per status with a count, each linking to the list of that status."""
    items = [(s, counts[s]) for s in STATUS_ORDER if counts.get(s)]
    if not items:
        return format_html('<p class="help">{}</p>', _("None."))
    top = max(n for _s, n in items)
    bars = format_html_join(
        "",
        '<a href="{}"><title>{}: {}</title><text x="0" y="{}" class="helix-chart-label">{}</text>'
        '<rect x="150" y="{}" width="{}" height="16" fill="{}"/><text x="{}" y="{}">{}</text></a>',
        (
            (
                _list_url(status=s),
                s,
                n,
                i * 24 + 13,
                RunStatus(s).label,
                i * 24,
                max(2, round(n / top * (width - 200))),
                COLOURS[STATUS_FAMILY[RunStatus(s)]],
                156 + max(2, round(n / top * (width - 200))),
                i * 24 + 13,
                n,
            )
            for i, (s, n) in enumerate(items)
        ),
    )
    return format_html(
        '<svg class="helix-chart" role="img" height="{}" viewBox="0 0 {} {}">{}</svg>',
        len(items) * 24,
        width,
        len(items) * 24,
        bars,
    )


def hourly_chart(hourly: list[tuple[datetime, dict[str, int]]], *, height: int = 120) -> SafeString:
    """Return an SVG of 24 stacked columns (runs started per hour, coloured by how they are now)."""
    top = max([sum(c.values()) for _h, c in hourly] + [1])
    parts: list[Any] = []
    for i, (hour, counts) in enumerate(hourly):
        y = height
        for status in STATUS_ORDER:
            n = counts.get(status, 0)
            if not n:
                continue
            h = max(1, round(n / top * (height - 14)))
            y -= h
            parts.append(
                format_html(
                    '<a href="{}"><title>{} {}: {} {}</title>'
                    '<rect x="{}" y="{}" width="16" height="{}" fill="{}"/></a>',
                    _list_url(status=status),
                    f"{local(hour):%H:00}",
                    RunStatus(status).label,
                    n,
                    _("runs"),
                    i * 20,
                    y,
                    h,
                    COLOURS[STATUS_FAMILY[RunStatus(status)]],
                )
            )
        if i % 6 == 0:
            parts.append(format_html('<text x="{}" y="{}">{}</text>', i * 20, height + 14, f"{local(hour):%H:00}"))
    return format_html(
        '<svg class="helix-chart" role="img" height="{}" viewBox="0 0 480 {}">{}</svg>',
        height + 18,
        height + 18,
        format_html_join("", "{}", ((p,) for p in parts)),
    )


def minute_chart(minutes: list[int], *, height: int = 60) -> SafeString:
    """Return an SVG sparkline of chunks stored per minute over the last hour (oldest left)."""
    top = max([*minutes, 1])
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="6" height="{}" fill="#1e88e5"><title>{}</title></rect>',
        (
            (i * 8, height - round(n / top * height), round(n / top * height), f"-{60 - i} min: {n}")
            for i, n in enumerate(minutes)
        ),
    )
    return format_html(
        '<svg class="helix-chart" role="img" height="{}" viewBox="0 0 480 {}">{}</svg>',
        height,
        height,
        bars,
    )


def context(now: datetime | None = None) -> dict[str, Any]:
    """Return the dashboard template's context: the numbers and the rendered charts."""
    board = build(now)

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:.1%}"

    def seconds(value: float | None) -> str:
        return "—" if value is None else duration(value)

    return {
        "board": board,
        "live_chart": status_bars(board.live),
        "day_chart": status_bars(board.day),
        "hourly_chart": hourly_chart(board.hourly),
        "minute_chart": minute_chart(board.chunks_per_minute),
        "stuck_url": _list_url(stuck="yes"),
        "attention_url": f"{reverse('admin:helix_django_run_changelist')}?view={ATTENTION}",
        "interrupted_open": board.unresolved.get(RunStatus.INTERRUPTED, 0),
        "failed_open": board.unresolved.get(RunStatus.FAILED, 0),
        "interrupted_url": _list_url(status=RunStatus.INTERRUPTED),
        "failed_url": _list_url(status=RunStatus.FAILED),
        "interrupted_rate": rate(board.interrupted_rate),
        "failed_rate": rate(board.failed_rate),
        "ttft_p50": seconds(board.ttft_p50),
        "ttft_p95": seconds(board.ttft_p95),
        "chunks_last_minute": board.chunks_per_minute[-1],
        "chunks_hour": sum(board.chunks_per_minute),
        "spend_tables": _spend_tables(spend(board.now - timedelta(hours=24))),
        "spend_days": spend_per_day(board.now),
        "spend_days_title": _("Spend per day (last %(days)s days, UTC)") % {"days": DAYS},
    }


def _spend_tables(rows: dict[str, list[Any]]) -> list[tuple[str, list[Any], str]]:
    """The dashboard's token tables of the last 24 h: ``(title, rows, id)``, interrupted and cancelled runs included."""
    return [
        (_("Tokens by model (24 h)"), rows["by_model"], "model"),
        (_("Tokens by ending (24 h)"), rows["by_status"], "status"),
        (_("Top users by tokens (24 h)"), rows["top_users"], "users"),
    ]
