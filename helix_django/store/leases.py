"""Leases on live runs: compare-and-set claims, renewals and hand-offs (DESIGN, "Runtime").

Also the filters of runs whose lease expired or that went silent (stuck), read by the
relaunch scan, the admin and the metrics.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from helix_django.conf import helix_settings
from helix_django.models import (
    LIVE_STATUSES,
    Run,
    RunStatus,
)
from helix_django.models.run import SCANNED_STATUSES
from helix_django.orm import retrying, sync_to_async


def renew_lease(run_id: str, owner: str, seconds: int) -> bool:
    """Extend the lease of ``owner`` on a live run by ``seconds``; False if it lost the run."""
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status__in=LIVE_STATUSES).update(
            lease_expires_at=now + timedelta(seconds=seconds)
        )
    )


def claim_lease(run_id: str, owner: str, seconds: int) -> bool:
    """Take the lease of a live run if it is free or expired (compare-and-set); True if taken."""
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner)
    return bool(
        Run.objects.filter(free, pk=run_id, status__in=LIVE_STATUSES).update(
            lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds), last_event_at=now
        )
    )


def take_over_lease(run_id: str, from_owner: str, owner: str, seconds: int) -> bool:
    """Move a live run's lease from ``from_owner`` to ``owner`` (compare-and-set); True if taken.

    The hand-off of a run to a task worker: of several workers given the same run, only
    the first takes it. False when the lease moved on (another worker, the relaunch scan)
    or the run is no longer live.
    """
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=from_owner, status__in=LIVE_STATUSES).update(
            lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds), last_event_at=now
        )
    )


def lease_expired_q(now: datetime | None = None) -> Q:
    """Return a filter for runs whose lease expired (or that never had one and went quiet)."""
    now = now or timezone.now()
    quiet = now - timedelta(seconds=helix_settings.LEASE_SECONDS)
    return Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, last_event_at__lt=quiet)


def is_lease_expired(run: Run, now: datetime | None = None) -> bool:
    """Whether ``run``'s lease expired (the same rule as :func:`lease_expired_q`)."""
    now = now or timezone.now()
    if run.lease_expires_at is not None:
        return run.lease_expires_at < now
    quiet = now - timedelta(seconds=helix_settings.LEASE_SECONDS)
    return run.last_event_at is not None and run.last_event_at < quiet


def stuck_q(now: datetime | None = None) -> Q:
    """Return a filter for stuck runs: non-terminal with an expired lease or no event for ``STUCK_AFTER_SECONDS``."""
    now = now or timezone.now()
    silent = now - timedelta(seconds=helix_settings.STUCK_AFTER_SECONDS)
    scanned = Q(status__in=SCANNED_STATUSES) & (lease_expired_q(now) | Q(last_event_at__lt=silent))
    waiting = Q(status=RunStatus.SUSPENDED_CLIENT_TOOL, last_event_at__lt=silent)
    return scanned | waiting


arenew_lease = retrying(renew_lease)
aclaim_lease = sync_to_async(claim_lease)
atake_over_lease = sync_to_async(take_over_lease)
