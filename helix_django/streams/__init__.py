"""Stream managers by alias: ``get_stream_manager(alias="default")``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from helix_django.streams.base import BaseStreamManager

_managers: dict[str, BaseStreamManager] = {}
_lock = threading.Lock()


class InvalidStreamManager(ImproperlyConfigured):
    """A configured stream manager alias or backend path cannot be loaded."""


def get_stream_manager(alias: str = "default") -> BaseStreamManager:
    """Return the cached stream manager configured under ``HELIX["STREAM_MANAGERS"][alias]``.

    Raises InvalidStreamManager naming the alias and path when it cannot be loaded.
    """
    manager = _managers.get(alias)
    if manager is not None:
        return manager
    from helix_django.conf import helix_settings

    with _lock:
        manager = _managers.get(alias)
        if manager is None:
            manager = _managers[alias] = load_stream_manager(alias, helix_settings.STREAM_MANAGERS)
    return manager


def load_stream_manager(alias: str, config: dict[str, dict]) -> BaseStreamManager:
    """Build (uncached) the stream manager of ``alias`` from a ``STREAM_MANAGERS`` dict."""
    try:
        entry = config[alias]
        path = entry["BACKEND"]
    except (KeyError, TypeError) as exc:
        raise InvalidStreamManager(f"HELIX['STREAM_MANAGERS'][{alias!r}] has no BACKEND") from exc
    try:
        backend = import_string(path)
    except ImportError as exc:
        raise InvalidStreamManager(f"Stream manager {alias!r}: cannot import {path!r}") from exc
    return backend(alias, entry.get("OPTIONS", {}))


def reset_stream_managers() -> None:
    """Forget cached managers (settings changed; tests), closing the connections they opened themselves."""
    with _lock:
        for manager in _managers.values():
            close = getattr(manager, "close_local_connections", None)
            if close is not None:
                close()
        _managers.clear()
