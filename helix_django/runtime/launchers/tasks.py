"""Runs on Django Tasks workers: the web process commits and claims, a task worker executes.

Set ``HELIX["LAUNCHER"] = {"BACKEND": "helix_django.runtime.launchers.tasks.TasksLauncher"}`` and a
``TASKS`` backend (``django.tasks`` on Django 6, the ``django-tasks`` backport on 5.2; any
backend with a worker, e.g. ``django_tasks_db.DatabaseBackend`` and ``manage.py db_worker``).
The hand-off (lease, take-over, a killed worker) is :mod:`.handoff`'s. The task is
:func:`execute_run` (also importable as ``helix_django.runtime.tasks_executor.execute_run``).
This module imports the optional Tasks framework: it is loaded only when configured.
"""

from __future__ import annotations

from typing import Any

from helix_django.runtime.launchers.handoff import HandoffLauncher, arun_handed_off

try:  # Django 6.x ships the Tasks framework; 5.2 uses the django-tasks backport.
    from django.tasks import task
except ImportError:  # pragma: no cover - depends on the Django version
    from django_tasks import task  # type: ignore[no-redef]  # same decorator, from the backport


class TasksLauncher(HandoffLauncher):
    """Hands each run to a Django Tasks worker after the run-start commit (:mod:`.handoff`)."""

    async def enqueue(self, run_id: str, from_owner: str, data: dict[str, Any]) -> None:
        """Enqueue ``execute_run`` on the default Tasks backend and queue."""
        await execute_run.aenqueue(run_id, from_owner, data)


@task()
async def execute_run(run_id: str, from_owner: str, data: dict[str, Any]) -> str:
    """Task: execute a run handed off by :class:`TasksLauncher` (see :func:`.handoff.arun_handed_off`)."""
    return await arun_handed_off(run_id, from_owner, data)
