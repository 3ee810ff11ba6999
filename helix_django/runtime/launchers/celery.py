"""Runs on Celery workers: the web process commits and claims, a Celery worker executes.

Set ``HELIX["LAUNCHER"] = {"BACKEND": "helix_django.runtime.launchers.celery.CeleryLauncher"}``,
load the site's Celery app in web processes as Celery's Django guide does
(``from .celery import app`` in the project package), and run workers with
``celery -A <project> worker`` on a broker such as Redis. The hand-off is
:mod:`.handoff`'s, the same as the Django Tasks launcher's: until a worker takes the run
the web executor holds a hand-off lease; a worker takes it with a compare-and-set on the
lease, so a task delivered twice (a redelivery, ``acks_late``) executes once and the
other delivery returns ``"skipped"``; a worker killed mid-run leaves its lease to expire
and the relaunch scan marks the run interrupted, never re-running it.

The task is ``helix_django.execute_run`` (a ``shared_task``, :func:`execute_run`; route it
with Celery's ``task_routes``); workers load it with this module or with
``helix_django.runtime.celery_executor``. Its
arguments are JSON (``run_id``, ``from_owner``, the :func:`.handoff.launch_data` dict).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from celery import shared_task

from helix_django.orm import sync_to_async
from helix_django.runtime.launchers.handoff import HandoffLauncher, arun_handed_off


class CeleryLauncher(HandoffLauncher):
    """Hands each run to a Celery worker after the run-start commit (:mod:`.handoff`)."""

    worker_kind = "celery"

    async def enqueue(self, run_id: str, from_owner: str, data: dict[str, Any]) -> None:
        """Send ``helix_django.execute_run`` to the broker (``apply_async``; the app's routing picks the queue)."""
        await sync_to_async(execute_run.apply_async)(args=[run_id, from_owner, data])


@shared_task(name="helix_django.execute_run", ignore_result=True)
def execute_run(run_id: str, from_owner: str, data: dict[str, Any]) -> str:
    """Celery task: execute a run handed off by :class:`CeleryLauncher` (see :func:`.handoff.arun_handed_off`)."""
    return async_to_sync(arun_handed_off)(run_id, from_owner, data)
