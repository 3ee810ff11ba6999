"""Leases on live runs: compare-and-set claims, renewals and hand-offs (DESIGN, "Runtime")."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from helix_django.models import (
    LIVE_STATUSES,
    Run,
)
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
    from django.db.models import Q

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


arenew_lease = retrying(renew_lease)
aclaim_lease = sync_to_async(claim_lease)
atake_over_lease = sync_to_async(take_over_lease)
