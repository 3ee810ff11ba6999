"""Settings for helix_django: one ``HELIX`` dict in Django settings, read lazily.

Usage::

    from helix_django.conf import helix_settings
    helix_settings.HEARTBEAT_SECONDS

A user value wins over the default. Values are cached per attribute and the cache is
cleared on Django's ``setting_changed`` signal, so ``override_settings(HELIX=...)`` works.
Never copy a setting into a module constant or class attribute at import time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Stream managers by alias: {"BACKEND": dotted path, "OPTIONS": {...}}.
    "STREAM_MANAGERS": {
        "default": {
            "BACKEND": "helix_django.streams.database.DatabaseStreamManager",
            "OPTIONS": {},
        },
    },
    # Seconds a stream is kept after its last write (Redis TTL; database pruning).
    "STREAM_TTL_SECONDS": 86_400,
    # Seconds of idle time before an SSE comment heartbeat is written.
    "HEARTBEAT_SECONDS": 15,
    # Fail-safe bound on a resume waiting in the run-start window (002, "The run-start window").
    "LIVE_WAIT_TIMEOUT_MS": 30_000,
    # Bound on one fenced snapshot read (002, "Consistent reads").
    "SNAPSHOT_READ_DEADLINE_MS": 10_000,
    # Largest accepted chat request body (002, "HandleChatStreamDeps": maxRequestBytes).
    "MAX_REQUEST_BYTES": 10 * 1024 * 1024,
    # Most message parts in one chat body, all messages together (docs/limits.md): bounds
    # the per-part validation work of one request (about 1 us a part, off the event loop).
    "MAX_REQUEST_PARTS": 20_000,
    # Largest stored chunk, so SSE frame and WebSocket message; longer deltas are split.
    "MAX_CHUNK_BYTES": 1_000_000,
    # Largest tool result (UTF-8 JSON), server or client tool (helix_django/limits.py).
    "MAX_TOOL_RESULT_BYTES": 512 * 1024,
    # Largest stored message (UTF-8 JSON), user or assistant; a run's answer stops there and fails.
    "MAX_MESSAGE_BYTES": 2 * 1024 * 1024,
    # Most messages (active rows) of one session; a send to a full session is refused (409).
    "MAX_SESSION_MESSAGES": 2_000,
    # Agents by name: {"PROVIDER": {"BACKEND": ..., "OPTIONS": {...}}, "MODEL": ..., ...}.
    "AGENTS": {
        "default": {
            "PROVIDER": {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider", "OPTIONS": {}},
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a helpful assistant.",
            "TOOLS": [],
            "MAX_STEPS": 8,
        },
    },
    "DEFAULT_AGENT": "default",
    # Where runs execute (helix_django.runtime.launchers): in-process asyncio tasks (the embedded
    # default), Django Tasks workers (.tasks.TasksLauncher) or Celery workers (.celery.CeleryLauncher).
    "LAUNCHER": {"BACKEND": "helix_django.runtime.launchers.local.LocalLauncher", "OPTIONS": {}},
    # Deprecated: an executor class path, mapped onto its launcher when LAUNCHER is not set.
    "EXECUTOR": None,
    # Lease held by the process executing a run; renewed every LEASE_RENEW_SECONDS.
    "LEASE_SECONDS": 30,
    "LEASE_RENEW_SECONDS": 10,
    # How long the relaunch scan follows a provider operation still running after its process died (0: never).
    "OPERATION_WAIT_SECONDS": 300,
    # On SIGTERM, how long live runs may finish before the rest are ended interrupted (0: no drain).
    "DRAIN_SECONDS": 10,
    # A live run with no event for this long is listed as stuck in the admin.
    "STUCK_AFTER_SECONDS": 300,
    # Most runs one bulk recovery action of the admin's changelist acts on (each is a recovery,
    # Check status a provider call): a larger selection is refused, nothing done.
    "ADMIN_BULK_MAX_RUNS": 100,
    # Stream writer coalescing: flush after this many ms or this many chunks.
    "FLUSH_INTERVAL_MS": 15,
    "FLUSH_MAX_CHUNKS": 64,
    # Merge text/reasoning deltas of one part that wait for the same flush into one stored
    # chunk (and one SSE frame); cursors and exactly-once delivery are unchanged.
    "COALESCE_DELTAS": True,
    # Whether anonymous visitors may chat (their sessions belong to their Django session).
    "ALLOW_ANONYMOUS": False,
    # manage.py helix_purge (helix_django.retention): stored chunks of a session whose last run
    # ended and committed, after CHUNKS_AFTER_HOURS idle (None: never); ended runs by status after
    # AFTER_DAYS (None: never), keeping their conversation rows (KEEP_MESSAGES) or deleting the
    # whole conversation once its current run ended so (KEEP_MESSAGES: False); rows per delete.
    "RETENTION": {
        "CHUNKS_AFTER_HOURS": 24,
        "RUNS": {
            "completed": {"AFTER_DAYS": None, "KEEP_MESSAGES": True},
            "superseded": {"AFTER_DAYS": 30, "KEEP_MESSAGES": True},
            "cancelled": {"AFTER_DAYS": None, "KEEP_MESSAGES": True},
            "failed": {"AFTER_DAYS": None, "KEEP_MESSAGES": True},
            "interrupted": {"AFTER_DAYS": None, "KEEP_MESSAGES": True},
        },
        "BATCH_SIZE": 500,
    },
    # Prometheus metrics (helix_django.metrics; needs prometheus_client): off unless True.
    "METRICS": False,
    # Channel layer alias used for cross-process stream wake-ups.
    "CHANNEL_LAYER": "default",
    # Seconds a live run's database writes are retried through a transient failure (the
    # database restarting, unreachable, locked, out of disk) before the run fails with it.
    "DATABASE_RETRY_SECONDS": 10,
    # DRF classes of every helix route (import strings); None: the host's REST_FRAMEWORK
    # defaults (helix_django.access.policy).
    "AUTHENTICATION_CLASSES": None,
    "PERMISSION_CLASSES": None,
    "THROTTLE_CLASSES": None,
    # Pagination of the list endpoints (import string or class); None: the host's
    # REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"]; "": never paginated (helix_django.access.policy).
    "PAGINATION_CLASS": None,
    # Rates of helix's throttle scopes under the host's DEFAULT_THROTTLE_RATES (None: unlimited).
    "THROTTLE_RATES": {"helix": None, "helix_chat": None},
    # Token budgets checked before every run starts (import strings; helix_django.budgets), and
    # their rates by scope, "<tokens>/<period>" (period: second, minute, hour, day); [] : none.
    "BUDGET_CLASSES": [],
    "BUDGET_RATES": {},
    # Prices by model name, decimal strings per "per" tokens (helix_django.pricing); {} : no costs.
    "MODEL_PRICES": {},
}


class HelixSettings:
    """Lazy, cached view of ``settings.HELIX`` over :data:`DEFAULTS`.

    Raises AttributeError for a name that is not a known setting.
    """

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        self.defaults = defaults or DEFAULTS
        self._cached: set[str] = set()

    @property
    def user_settings(self) -> dict[str, Any]:
        """Return the project's ``HELIX`` dict (empty when unset)."""
        return getattr(settings, "HELIX", None) or {}

    def __getattr__(self, attr: str) -> Any:
        if attr not in self.defaults:
            raise AttributeError(f"Invalid helix_django setting: {attr!r}")
        value = self.user_settings.get(attr, self.defaults[attr])
        self._cached.add(attr)
        setattr(self, attr, value)
        return value

    def reload(self) -> None:
        """Forget cached values so the next read sees current Django settings."""
        for attr in self._cached:
            delattr(self, attr)
        self._cached.clear()


helix_settings = HelixSettings(DEFAULTS)


class SettingImportError(ImproperlyConfigured, ImportError):
    """A ``HELIX`` import string names nothing importable.

    ``setting`` names where the string sits (``"HELIX['EXECUTOR']"``,
    ``"HELIX['AGENTS']['default']['PROVIDER']['BACKEND']"``), ``dotted_path`` is the string and
    ``reason`` the import's own message. It is also an ImportError, so code catching that
    still catches it.
    """

    def __init__(self, setting: str, path: str, reason: BaseException | str) -> None:
        super().__init__(f"{setting}: cannot import {path!r} ({reason}).")
        self.setting = setting
        self.dotted_path = path
        self.reason = str(reason)


def import_from_setting(value: Any, setting: str) -> Any:
    """Return the object a setting names: a dotted path is imported, anything else passes through.

    ``setting`` names the setting for the error, e.g. ``"HELIX['EXECUTOR']"``.
    Raises SettingImportError when the path cannot be imported (no module, no attribute,
    or a module that fails with ImportError while loading).
    """
    if not isinstance(value, str):
        return value
    try:
        return import_string(value)
    except ImportError as exc:
        raise SettingImportError(setting, value, exc) from exc


def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "HELIX":
        helix_settings.reload()


setting_changed.connect(_reload_settings)
