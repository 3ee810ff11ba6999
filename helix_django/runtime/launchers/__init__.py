"""Launchers: where a run executes once it opened (in this process, on Django Tasks or Celery workers).

One handler loads ``HELIX["LAUNCHER"] = {"BACKEND": <dotted path>, "OPTIONS": {...}}``;
the built-in backends are :class:`~.local.LocalLauncher` (the default),
:class:`~.tasks.TasksLauncher` and :class:`~.celery.CeleryLauncher`. The deprecated
``HELIX["EXECUTOR"]`` (an executor class path) still works when ``LAUNCHER`` is not set:
each built-in executor maps onto its launcher, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from helix_django.conf import helix_settings, import_from_setting
from helix_django.runtime.launchers.base import BaseLauncher

#: The deprecated ``HELIX["EXECUTOR"]`` values and the launcher each one means.
EXECUTOR_LAUNCHERS = {
    "helix_django.runtime.executor.LocalExecutor": "helix_django.runtime.launchers.local.LocalLauncher",
    "helix_django.runtime.tasks_executor.TasksExecutor": "helix_django.runtime.launchers.tasks.TasksLauncher",
    "helix_django.runtime.celery_executor.CeleryExecutor": "helix_django.runtime.launchers.celery.CeleryLauncher",
}

DEFAULT_LAUNCHER = {"BACKEND": "helix_django.runtime.launchers.local.LocalLauncher", "OPTIONS": {}}


def launcher_setting() -> tuple[dict[str, Any], str]:
    """Return the launcher configuration in force and the setting it comes from (for messages).

    ``HELIX["LAUNCHER"]`` when set; else the deprecated ``HELIX["EXECUTOR"]`` mapped by
    :data:`EXECUTOR_LAUNCHERS` (a DeprecationWarning); else the local launcher. Raises
    ImproperlyConfigured for an ``EXECUTOR`` that names no built-in executor.
    """
    user = helix_settings.user_settings
    if "LAUNCHER" in user or not user.get("EXECUTOR"):
        config = helix_settings.LAUNCHER or DEFAULT_LAUNCHER
        return {"BACKEND": config.get("BACKEND", DEFAULT_LAUNCHER["BACKEND"]), **config}, "HELIX['LAUNCHER']"
    executor = user["EXECUTOR"]
    warnings.warn(
        "HELIX['EXECUTOR'] is deprecated: set HELIX['LAUNCHER'] = {'BACKEND': ...} "
        "(helix_django.runtime.launchers.local.LocalLauncher, .tasks.TasksLauncher, .celery.CeleryLauncher).",
        DeprecationWarning,
        stacklevel=3,
    )
    backend = EXECUTOR_LAUNCHERS.get(executor)
    if backend is None:
        raise ImproperlyConfigured(
            f"HELIX['EXECUTOR'] = {executor!r} names no built-in executor: set HELIX['LAUNCHER'] instead."
        )
    return {"BACKEND": backend, "OPTIONS": {}}, "HELIX['EXECUTOR']"


def load_launcher() -> BaseLauncher:
    """Build the configured launcher (:func:`launcher_setting`).

    Raises SettingImportError (an ImproperlyConfigured) when ``BACKEND`` cannot be
    imported, ImproperlyConfigured when it is not a :class:`BaseLauncher` subclass.
    """
    config, setting = launcher_setting()
    cls = import_from_setting(config["BACKEND"], f"{setting}['BACKEND']" if "LAUNCHER" in setting else setting)
    if not (isinstance(cls, type) and issubclass(cls, BaseLauncher)):
        raise ImproperlyConfigured(f"{setting}: {config['BACKEND']!r} is not a BaseLauncher subclass.")
    return cls(config.get("OPTIONS") or {})


__all__ = ["DEFAULT_LAUNCHER", "EXECUTOR_LAUNCHERS", "BaseLauncher", "launcher_setting", "load_launcher"]
