"""``CeleryExecutor``, the name the deprecated ``HELIX["EXECUTOR"]`` used; the ``helix_django.execute_run`` task.

Configure ``HELIX["LAUNCHER"] = {"BACKEND": "helix_django.runtime.launchers.celery.CeleryLauncher"}``
instead (:mod:`helix_django.runtime.launchers.celery`, which defines :func:`execute_run`).
Celery workers may load the task through either module.
"""

from __future__ import annotations

from helix_django.runtime.executor import Executor
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.launchers.celery import CeleryLauncher, execute_run

__all__ = ["CeleryExecutor", "execute_run"]


class CeleryExecutor(Executor):
    """An executor over :class:`~helix_django.runtime.launchers.celery.CeleryLauncher`."""

    def __init__(self, launcher: BaseLauncher | None = None) -> None:
        super().__init__(launcher if launcher is not None else CeleryLauncher())
