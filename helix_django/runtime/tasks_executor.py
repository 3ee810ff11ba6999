"""Runs on Django Tasks workers: the web process commits and claims, a task worker executes.

Set ``HELIX["EXECUTOR"] = "helix_django.runtime.tasks_executor.TasksExecutor"`` and a
``TASKS`` backend (``django.tasks`` on Django 6, the ``django-tasks`` backport on 5.2; any
backend with a worker, e.g. ``django_tasks_db.DatabaseBackend`` and ``manage.py db_worker``).
The hand-off (lease, take-over, a killed worker) is :mod:`helix_django.runtime.handoff`'s.
"""

from __future__ import annotations

from typing import Any

from helix_django.runtime.handoff import HandoffExecutor, arun_handed_off, launch_data, worker_owner

try:  # Django 6.x ships the Tasks framework; 5.2 uses the django-tasks backport.
    from django.tasks import task
except ImportError:  # pragma: no cover - depends on the Django version
    from django_tasks import task  # type: ignore[no-redef]  # same decorator, from the backport

__all__ = ["TasksExecutor", "arun_handed_off", "execute_run", "launch_data", "worker_owner"]


class TasksExecutor(HandoffExecutor):
    """Hands each run to a Django Tasks worker after the run-start commit (:mod:`.handoff`)."""

    async def enqueue(self, run_id: str, from_owner: str, data: dict[str, Any]) -> None:
        """Enqueue :data:`execute_run` on the default Tasks backend and queue."""
        await execute_run.aenqueue(run_id, from_owner, data)


@task()
async def execute_run(run_id: str, from_owner: str, data: dict[str, Any]) -> str:
    """Task: execute a run handed off by :class:`TasksExecutor` (see :func:`arun_handed_off`)."""
    return await arun_handed_off(run_id, from_owner, data)
