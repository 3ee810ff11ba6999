"""Stream managers by alias: one per process, built from ``HELIX["STREAM_MANAGERS"]`` on first use.

:data:`stream_managers` is a Django connection handler (as ``django.db.connections`` and
``django.core.cache.caches``): ``stream_managers[alias]`` builds the manager of ``alias``
once, ``stream_managers.reset()`` closes and forgets every manager. It resets itself when
the ``HELIX`` setting changes (``override_settings``), through Django's ``setting_changed``.
Unlike Django's handlers its managers are shared by every thread and event loop of the
process: a manager's notifier wakes readers across them.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.connection import BaseConnectionHandler

from helix_django.conf import SettingImportError, helix_settings, import_from_setting
from helix_django.streams.base import BaseStreamManager


class InvalidStreamManager(ImproperlyConfigured):
    """A configured stream manager alias or backend path cannot be loaded."""


def load_stream_manager(alias: str, config: dict[str, dict]) -> BaseStreamManager:
    """Build (uncached) the stream manager of ``alias`` from a ``STREAM_MANAGERS`` dict.

    Raises InvalidStreamManager naming the alias when it has no ``BACKEND`` or the path
    cannot be imported.
    """
    try:
        entry = config[alias]
        path = entry["BACKEND"]
    except (KeyError, TypeError) as exc:
        raise InvalidStreamManager(f"HELIX['STREAM_MANAGERS'][{alias!r}] has no BACKEND") from exc
    try:
        backend = import_from_setting(path, f"HELIX['STREAM_MANAGERS'][{alias!r}]['BACKEND']")
    except SettingImportError as exc:
        raise InvalidStreamManager(f"Stream manager {alias!r}: cannot import {path!r}") from exc
    manager: BaseStreamManager = backend(alias, entry.get("OPTIONS", {}))
    return manager


class StreamManagerHandler(BaseConnectionHandler):
    """The process's stream managers by alias (``HELIX["STREAM_MANAGERS"]``, or the ``settings`` given)."""

    settings_name = "STREAM_MANAGERS"
    exception_class = InvalidStreamManager

    def __init__(self, settings: dict[str, dict] | None = None) -> None:
        super().__init__(settings)
        self._given = settings
        self._connections = SimpleNamespace()
        self._lock = threading.Lock()

    def configure_settings(self, settings: dict[str, dict] | None) -> dict[str, dict]:
        """Return ``settings``, or ``HELIX["STREAM_MANAGERS"]`` when none was given."""
        return helix_settings.STREAM_MANAGERS if settings is None else settings

    def create_connection(self, alias: str) -> BaseStreamManager:
        """Build the manager of ``alias`` (raises InvalidStreamManager)."""
        return load_stream_manager(alias, self.settings)

    def __getitem__(self, alias: str) -> BaseStreamManager:
        """Return the manager of ``alias``, built once per process (raises InvalidStreamManager)."""
        built: dict[str, BaseStreamManager] = vars(self._connections)
        manager = built.get(alias)
        if manager is not None:
            return manager
        with self._lock:
            built = vars(self._connections)
            manager = built.get(alias)
            if manager is None:
                manager = built[alias] = self.create_connection(alias)
        return manager

    def reset(self) -> None:
        """Close the connections the managers opened themselves, forget them, and re-read the settings."""
        with self._lock:
            managers = list(vars(self._connections).values())
            self._connections = SimpleNamespace()
            self.__dict__.pop("settings", None)
            self._settings = self._given
        for manager in managers:
            manager.close()


stream_managers = StreamManagerHandler()


def get_stream_manager(alias: str = "default") -> BaseStreamManager:
    """Return the stream manager configured under ``HELIX["STREAM_MANAGERS"][alias]``, built once per process.

    Raises InvalidStreamManager naming the alias and path when it cannot be loaded.
    """
    return stream_managers[alias]


def reset_stream_managers() -> None:
    """Forget the built managers (settings changed; tests), closing the connections they opened themselves."""
    stream_managers.reset()


def _reset_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "HELIX":
        stream_managers.reset()


setting_changed.connect(_reset_on_setting_changed, dispatch_uid="helix_django.streams.registry")
