"""Prometheus metrics of runs, streams and recovery (opt-in: ``HELIX["METRICS"] = True``).

Needs ``prometheus_client`` (the ``metrics`` extra). Counters and histograms are fed by
the run signals in the process that runs the generation; gauges (live runs, stuck runs,
live streams) are read from the database at scrape time, so every process reports the
same numbers for them. Mount :func:`metrics_view` where Prometheus scrapes (see
docs/metrics.md for the names and example queries)::

    path("metrics/", helix_django.metrics.metrics_view)

Names (all prefixed ``helix_``):

- ``runs_started_total{agent,kind}``, ``runs_ended_total{agent,status}`` (counters);
- ``time_to_first_token_seconds{agent}``: run start to its first text/reasoning/tool chunk;
- ``run_duration_seconds{agent,status}``: run start to its terminal commit;
- ``recovery_actions_total{action,outcome}`` (counter);
- ``tokens_total{model,status,kind,source}``: the input and output tokens of ended runs
  (``Run.usage``, :mod:`helix_django.usage`), ``source`` ``reported`` or ``estimated``;
- ``cost_total{model,currency}``: what ended runs' tokens cost at their model's price
  (``HELIX["MODEL_PRICES"]``, :mod:`helix_django.pricing`); unpriced models are not counted;
- ``delivery_lag_seconds{route}``: a live reader's chunk, from its store (the stream
  writer's flush stamp ``_at``) to its frame leaving for the client, per route (``chat``,
  ``stream``, ``websocket``), in the process serving the reader;
- ``runs_live{status}``, ``runs_stuck``, ``streams_live`` (gauges, read at scrape).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse

from helix_django.conf import helix_settings
from helix_django.models import ChatSession, Run
from helix_django.models.run import LIVE_STATUSES
from helix_django.pricing import run_cost
from helix_django.signals import recovery_action_taken, run_finished, run_started
from helix_django.store.leases import stuck_q

#: Histogram buckets in seconds (a first token comes within milliseconds to a few seconds).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
DURATION_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

_metrics: dict[str, Any] | None = None


def is_enabled() -> bool:
    """Whether ``HELIX["METRICS"]`` is on (the default is off)."""
    return bool(helix_settings.METRICS)


def _build() -> dict[str, Any]:
    from prometheus_client import CollectorRegistry, Counter, Histogram

    registry = CollectorRegistry(auto_describe=True)
    registry.register(_DatabaseCollector())
    return {
        "registry": registry,
        "started": Counter("helix_runs_started", "Runs started.", ["agent", "kind"], registry=registry),
        "ended": Counter("helix_runs_ended", "Runs ended, by terminal status.", ["agent", "status"], registry=registry),
        "ttft": Histogram(
            "helix_time_to_first_token_seconds",
            "Seconds from a run's start to its first text, reasoning or tool chunk.",
            ["agent"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        "duration": Histogram(
            "helix_run_duration_seconds",
            "Seconds from a run's start to its terminal commit.",
            ["agent", "status"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        ),
        "lag": Histogram(
            "helix_delivery_lag_seconds",
            "Seconds from a chunk's store to its frame leaving for a live reader's client.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        "actions": Counter(
            "helix_recovery_actions", "Recovery actions taken.", ["action", "outcome"], registry=registry
        ),
        "tokens": Counter(
            "helix_tokens",
            "Tokens of ended runs' model calls, by model, ending, kind and source (reported / estimated).",
            ["model", "status", "kind", "source"],
            registry=registry,
        ),
        "cost": Counter(
            "helix_cost",
            "What ended runs' tokens cost at their model's price, by model and currency.",
            ["model", "currency"],
            registry=registry,
        ),
    }


def metrics() -> dict[str, Any]:
    """Return the metric objects (built once per process, on first use)."""
    global _metrics  # noqa: PLW0603 - one registry per process, built lazily (prometheus_client is optional)
    if _metrics is None:
        _metrics = _build()
    return _metrics


class _DatabaseCollector:
    """Gauges read from the database at scrape time: live runs by status, stuck runs, live streams."""

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        live = GaugeMetricFamily("helix_runs_live", "Runs that may still write, by status.", labels=["status"])
        counts = dict(
            Run.objects.filter(status__in=LIVE_STATUSES).values_list("status").annotate(n=Count("id")).order_by()
        )
        for status in sorted(LIVE_STATUSES):
            live.add_metric([str(status)], counts.get(status, 0))
        yield live
        yield GaugeMetricFamily(
            "helix_runs_stuck",
            "Live runs with an expired lease or silent too long.",
            value=Run.objects.filter(stuck_q()).count(),
        )
        streams = ChatSession.objects.filter(current_run__status__in=LIVE_STATUSES).count()
        yield GaugeMetricFamily("helix_streams_live", "Session streams with a live run.", value=streams)


def _seconds_since(start: Any, end: Any) -> float | None:
    return None if start is None or end is None else max(0.0, (end - start).total_seconds())


async def _on_run_started(sender: Any, run: Any, **kwargs: Any) -> None:
    if not is_enabled():
        return
    metrics()["started"].labels(run.agent, run.kind).inc()


async def _on_run_finished(sender: Any, run: Any, status: str = "", **kwargs: Any) -> None:
    if not is_enabled():
        return
    m = metrics()
    status = status or run.status
    m["ended"].labels(run.agent, status).inc()
    seconds = _seconds_since(run.started_at or run.created_at, run.finished_at)
    if seconds is not None:
        m["duration"].labels(run.agent, status).observe(seconds)
    usage = run.usage or {}
    estimated = int(usage.get("estimatedTokens", 0))
    for kind, key in (("input", "inputTokens"), ("output", "outputTokens")):
        count = int(usage.get(key, 0))
        if kind == "output" and estimated:
            m["tokens"].labels(run.model, status, kind, "estimated").inc(estimated)
            count -= estimated
        if count:
            m["tokens"].labels(run.model, status, kind, "reported").inc(count)
    cost = run_cost(run.model, usage)
    if cost is not None and cost.amount:
        m["cost"].labels(run.model, cost.currency).inc(float(cost.amount))


async def _on_recovery_action(sender: Any, run: Any, action: str = "", outcome: str = "", **kwargs: Any) -> None:
    if not is_enabled():
        return
    metrics()["actions"].labels(action, outcome).inc()


def record_first_token(run: Any) -> None:
    """Record ``run``'s time to first token, from its start to now (the runtime calls it once per run)."""
    if is_enabled():
        started = (run.started_at or run.created_at).timestamp()
        metrics()["ttft"].labels(run.agent).observe(max(0.0, time.time() - started))


def delivery_observer(route: str) -> Callable[[dict[str, Any]], None] | None:
    """Return a function recording a stored chunk's delivery lag on ``route``, or None when metrics are off.

    Call once per response (the check is not repeated per chunk), then the returned
    function for each chunk a live reader sends. The lag is ``now - chunk["_at"]`` in
    seconds (``_at``: epoch ms of the stream writer's flush); a chunk without ``_at``
    (appended outside the writer) is not counted. Clocks of two hosts may differ: the
    figure is exact when the writer and the reader share a host.
    """
    if not is_enabled():
        return None
    histogram = metrics()["lag"].labels(route)

    def observe(chunk: dict[str, Any]) -> None:
        stored_ms = chunk.get("_at")
        if isinstance(stored_ms, int):
            histogram.observe(max(0.0, time.time() - stored_ms / 1000))

    return observe


def connect_signals() -> None:
    """Feed the counters from the run signals (idempotent: dispatch uids; each receiver checks ``METRICS``)."""
    run_started.connect(_on_run_started, dispatch_uid="helix_metrics_run_started")
    run_finished.connect(_on_run_finished, dispatch_uid="helix_metrics_run_finished")
    recovery_action_taken.connect(_on_recovery_action, dispatch_uid="helix_metrics_recovery_action")


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve the Prometheus text exposition; 404 when ``HELIX["METRICS"]`` is off."""
    if not is_enabled():
        raise Http404
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return HttpResponse(generate_latest(metrics()["registry"]), content_type=CONTENT_TYPE_LATEST)
