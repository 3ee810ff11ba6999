"""``TasksExecutor``, the name the deprecated ``HELIX["EXECUTOR"]`` used; the task under its former path.

Configure ``HELIX["LAUNCHER"] = {"BACKEND": "helix_django.runtime.launchers.tasks.TasksLauncher"}``
instead (:mod:`helix_django.runtime.launchers.tasks`, which defines :func:`execute_run`).
"""

from __future__ import annotations

from helix_django.runtime.executor import Executor
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.launchers.handoff import arun_handed_off, launch_data, worker_owner
from helix_django.runtime.launchers.tasks import TasksLauncher, execute_run

__all__ = ["TasksExecutor", "arun_handed_off", "execute_run", "launch_data", "worker_owner"]


class TasksExecutor(Executor):
    """An executor over :class:`~helix_django.runtime.launchers.tasks.TasksLauncher`."""

    def __init__(self, launcher: BaseLauncher | None = None) -> None:
        super().__init__(launcher if launcher is not None else TasksLauncher())
