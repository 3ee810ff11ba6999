"""System checks (``helix_django.E001``...; listed in docs/checks.md)."""

from __future__ import annotations

import warnings
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router

from helix_django import cost_checks  # noqa: F401 - registers W009
from helix_django.access import checks as access_checks  # noqa: F401 - registers W008
from helix_django.conf import DEFAULTS, SettingImportError, helix_settings, import_from_setting
from helix_django.limits import check_limits
from helix_django.models import ChatSession, Run
from helix_django.pricing import table_problems
from helix_django.runtime.launchers import load_launcher
from helix_django.runtime.multitask import STRATEGIES
from helix_django.runtime.providers.scripted import ScriptedProvider
from helix_django.runtime.tools import load_tools


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Validate ``settings.HELIX``: known keys, loadable backends, channel layer, SQLite WAL."""
    messages: list[Any] = []
    user = getattr(settings, "HELIX", None) or {}
    if not isinstance(user, dict):
        return [Error("HELIX must be a dict.", hint="Set HELIX = {...} in settings.", id="helix_django.E001")]
    for key in sorted(set(user) - set(DEFAULTS)):
        messages.append(
            Warning(
                f"Unknown HELIX setting {key!r}.",
                hint="Remove it or check its spelling; see the configuration reference in docs/configuration.md.",
                id="helix_django.W001",
            )
        )
    messages.extend(_check_numbers(user))
    messages.extend(check_limits(user))

    uses_database = False
    for alias, entry in (helix_settings.STREAM_MANAGERS or {}).items():
        path = entry.get("BACKEND", "") if isinstance(entry, dict) else ""
        try:
            backend = import_from_setting(path, f"HELIX['STREAM_MANAGERS'][{alias!r}]['BACKEND']")
        except SettingImportError as exc:
            messages.append(
                Error(
                    f"Stream manager {alias!r}: cannot import {path!r} ({exc.reason}).",
                    hint="HELIX['STREAM_MANAGERS'][alias]['BACKEND'] must be a dotted path to a BaseStreamManager; "
                    "helix's Redis manager needs the redis extra (pip install 'helix_django[redis]').",
                    id="helix_django.E002",
                )
            )
            continue
        uses_database = uses_database or path.endswith("DatabaseStreamManager")
        messages.extend(backend(alias, entry.get("OPTIONS", {})).check())  # the backend validates its OPTIONS
    for name, agent in (helix_settings.AGENTS or {}).items():
        path = (agent.get("PROVIDER") or {}).get("BACKEND", "") if isinstance(agent, dict) else ""
        try:
            import_from_setting(path, f"HELIX['AGENTS'][{name!r}]['PROVIDER']['BACKEND']")
        except SettingImportError as exc:
            messages.append(
                Error(
                    f"Agent {name!r}: cannot import provider {path!r} ({exc.reason}).",
                    hint="HELIX['AGENTS'][name]['PROVIDER']['BACKEND'] must be a dotted path to a provider class; "
                    "helix's OpenAI provider needs the openai extra (pip install 'helix_django[openai]').",
                    id="helix_django.E003",
                )
            )
        messages.extend(_check_tools(name, agent))
        messages.extend(_check_multitask(name, agent))
    if helix_settings.DEFAULT_AGENT not in (helix_settings.AGENTS or {}):
        messages.append(
            Warning(
                f"HELIX['DEFAULT_AGENT'] is {helix_settings.DEFAULT_AGENT!r}, which is not in HELIX['AGENTS'].",
                hint="New sessions get this agent: name one of HELIX['AGENTS'] (a send to a session created "
                "without naming its agent is refused agent_unknown).",
                id="helix_django.W006",
            )
        )
    messages.extend(_check_launcher())
    messages.extend(
        Error(problem, hint="See docs/configuration.md, MODEL_PRICES.", id="helix_django.E011")
        for problem in table_problems(helix_settings.MODEL_PRICES)
    )
    if not getattr(settings, "CHANNEL_LAYERS", None):
        messages.append(
            Warning(
                "No channel layer is configured.",
                hint="Set CHANNEL_LAYERS; the in-memory layer suits one process, channels_redis several.",
                id="helix_django.W002",
            )
        )
    messages.extend(_check_layer_timeouts())
    messages.extend(_check_database())
    messages.extend(_check_user_database())
    db = settings.DATABASES.get("default", {})
    if uses_database and db.get("ENGINE", "").endswith("sqlite3"):
        init = (db.get("OPTIONS") or {}).get("init_command", "")
        if "journal_mode=wal" not in init.replace(" ", "").lower():
            messages.append(
                Warning(
                    "SQLite is used with the database stream manager but WAL is not enabled.",
                    hint="Add OPTIONS={'init_command': 'PRAGMA journal_mode=WAL;', 'transaction_mode': 'IMMEDIATE'}.",
                    id="helix_django.W003",
                )
            )
    return messages


@register()
def check_scripted_provider(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W007 when a site out of ``DEBUG`` has agents that answer with the scripted provider.

    Without ``HELIX["AGENTS"]`` the default agent is the scripted model (``conf.DEFAULTS``):
    right while developing, a fake in production. Returns one warning naming every such
    agent, or ``[]`` in ``DEBUG`` or when no agent is scripted (an unimportable provider is E003's).
    """
    if settings.DEBUG:
        return []
    scripted = []
    for name, agent in (helix_settings.AGENTS or {}).items():
        path = (agent.get("PROVIDER") or {}).get("BACKEND", "") if isinstance(agent, dict) else ""
        try:
            backend = import_from_setting(path, f"HELIX['AGENTS'][{name!r}]['PROVIDER']['BACKEND']")
        except SettingImportError:
            continue
        if isinstance(backend, type) and issubclass(backend, ScriptedProvider):
            scripted.append(name)
    if not scripted:
        return []
    names = ", ".join(repr(name) for name in scripted)
    return [
        Warning(
            f"DEBUG is off and agent(s) {names} answer with the scripted provider, a fake model.",
            hint="Configure a real model in HELIX['AGENTS'], e.g. {'default': {'PROVIDER': {'BACKEND': "
            "'helix_django.runtime.providers.openai.OpenAIProvider'}, 'MODEL': 'gpt-4o-mini'}} with "
            'OPENAI_API_KEY set (README, "Install into an existing project").',
            id="helix_django.W007",
        )
    ]


#: channels_redis's blocking receive (``BZPOPMIN``) waits this long, in seconds.
LAYER_BLOCKING_SECONDS = 5


def _check_layer_timeouts() -> list[Any]:
    """W005: a channels_redis layer whose Redis clients time out before its blocking receive returns.

    redis-py 8 defaults ``socket_timeout`` to 5 s, the layer's own wait, so ``receive()``
    raises ``TimeoutError`` every 5 s of quiet (channels_redis#422): Channels' consumers on
    that layer crash (WebSockets close 1011) and cross-process wake-ups stall.
    """
    try:
        import redis
    except ImportError:
        return []
    if int(redis.__version__.split(".")[0]) < 8:
        return []
    messages = []
    for alias, layer in (getattr(settings, "CHANNEL_LAYERS", None) or {}).items():
        if not str(layer.get("BACKEND", "")).startswith("channels_redis."):
            continue
        for host in (layer.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]:
            timeout = host.get("socket_timeout", LAYER_BLOCKING_SECONDS) if isinstance(host, dict) else 5.0
            if timeout is not None and timeout <= LAYER_BLOCKING_SECONDS:
                messages.append(
                    Warning(
                        f"CHANNEL_LAYERS[{alias!r}]: a Redis host's socket_timeout ({timeout} s) is not above "
                        f"channels_redis's blocking receive ({LAYER_BLOCKING_SECONDS} s).",
                        hint='Give each host {"address": ..., "socket_timeout": 10} (redis-py 8 defaults it to 5 s: '
                        "receive() then fails every 5 s, channels_redis#422; docs/scale-out.md).",
                        id="helix_django.W005",
                    )
                )
                break
    return messages


def _check_tools(name: str, agent: Any) -> list[Any]:
    """An agent's ``TOOLS`` that cannot be loaded (every run of the agent would fail to start)."""
    entries = agent.get("TOOLS") if isinstance(agent, dict) else None
    for entry in entries or []:
        try:
            load_tools([entry], setting=f"HELIX['AGENTS'][{name!r}]['TOOLS']")
        except (ImportError, TypeError) as exc:
            return [
                Error(
                    f"Agent {name!r}: cannot load tool {entry!r} ({type(exc).__name__}: {exc}).",
                    hint="Each of HELIX['AGENTS'][name]['TOOLS'] is a dotted path to a helix_django Tool "
                    "(made with @tool or client_tool) or a Tool object.",
                    id="helix_django.E007",
                )
            ]
    return []


def _check_multitask(name: str, agent: Any) -> list[Any]:
    """An agent's ``MULTITASK`` that names no strategy (every send meeting a live answer would fail)."""
    if not isinstance(agent, dict) or "MULTITASK" not in agent or agent["MULTITASK"] in STRATEGIES:
        return []
    return [
        Error(
            f"Agent {name!r}: MULTITASK is not a multitask strategy.",
            hint=f"HELIX['AGENTS'][name]['MULTITASK'] is one of {', '.join(STRATEGIES)} (default reject); "
            "see docs/transport.md, 'A message sent while an answer is being written'.",
            id="helix_django.E009",
        )
    ]


#: Database vendors the store and the database stream manager are written for.
SUPPORTED_VENDORS = ("sqlite", "postgresql")


def _check_database() -> list[Any]:
    """E006 when helix's tables live on a database other than SQLite or PostgreSQL.

    Their writes rely on deferred foreign keys (a new session and its first run are
    inserted in one transaction) and on ``INSERT .. ON CONFLICT`` (stream claims).
    """
    alias = router.db_for_write(Run) or "default"
    if alias not in connections:
        return []  # Django's own checks name a router's unknown alias
    vendor = connections[alias].vendor
    if vendor in SUPPORTED_VENDORS:
        return []
    return [
        Error(
            f"helix_django's tables are on database {alias!r} ({vendor}); SQLite and PostgreSQL are supported.",
            hint="Put helix_django's models, together with the user model (AUTH_USER_MODEL), on a SQLite "
            "or PostgreSQL database: a session's owner is a foreign key to the user table, so both must "
            "be on one database (DATABASE_ROUTERS).",
            id="helix_django.E006",
        )
    ]


def _check_user_database() -> list[Any]:
    """E008 when a router writes helix's models to another database than the user model's.

    A session's ``owner`` is a foreign key to ``AUTH_USER_MODEL``: a foreign key cannot
    cross databases, so every send would fail on it. Compares
    ``router.db_for_write(ChatSession)`` with ``router.db_for_write(get_user_model())``.
    """
    helix_alias = router.db_for_write(ChatSession) or "default"
    user_alias = router.db_for_write(get_user_model()) or "default"
    if helix_alias == user_alias:
        return []
    return [
        Error(
            f"helix_django's models are routed to database {helix_alias!r} and the user model "
            f"(AUTH_USER_MODEL) to {user_alias!r}.",
            hint="A session's owner is a foreign key to the user model, which cannot cross databases: "
            "route helix_django's models to the database of the user model (DATABASE_ROUTERS).",
            id="helix_django.E008",
        )
    ]


#: Settings that must be positive numbers (seconds, milliseconds, bytes, counts).
NUMERIC_SETTINGS = (
    "STREAM_TTL_SECONDS",
    "HEARTBEAT_SECONDS",
    "LIVE_WAIT_TIMEOUT_MS",
    "SNAPSHOT_READ_DEADLINE_MS",
    "MAX_REQUEST_BYTES",
    "LEASE_SECONDS",
    "LEASE_RENEW_SECONDS",
    "STUCK_AFTER_SECONDS",
    "ADMIN_BULK_MAX_RUNS",
    "FLUSH_INTERVAL_MS",
    "FLUSH_MAX_CHUNKS",
)


def _check_numbers(user: dict[str, Any]) -> list[Any]:
    """E005 for a numeric setting that is not a positive number; W004 when the lease renews too late."""
    messages: list[Any] = []
    for key in NUMERIC_SETTINGS:
        if key not in user:
            continue
        value = user[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            messages.append(
                Error(
                    f"HELIX[{key!r}] must be a positive number.",
                    hint=f"Set HELIX[{key!r}] to a number above 0 (the unit is in its name), or remove it.",
                    id="helix_django.E005",
                )
            )
    lease = user.get("LEASE_SECONDS", DEFAULTS["LEASE_SECONDS"])
    renew = user.get("LEASE_RENEW_SECONDS", DEFAULTS["LEASE_RENEW_SECONDS"])
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lease, renew))
    if numbers and lease > 0 and renew >= lease:
        messages.append(
            Warning(
                "HELIX['LEASE_RENEW_SECONDS'] is not below HELIX['LEASE_SECONDS']: leases expire before renewal.",
                hint="Renew at most every third of the lease, e.g. LEASE_SECONDS=30, LEASE_RENEW_SECONDS=10.",
                id="helix_django.W004",
            )
        )
    return messages


def _check_launcher() -> list[CheckMessage]:
    """E004 when the launcher (or the deprecated executor) cannot be loaded; else the launcher's own check()."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            launcher = load_launcher()
        except ImproperlyConfigured as exc:
            return [
                Error(
                    f"Cannot load the launcher: {exc}",
                    hint="HELIX['LAUNCHER']['BACKEND'] must be a dotted path to a BaseLauncher subclass "
                    "(HELIX['EXECUTOR'], deprecated, one of the built-in executors).",
                    id="helix_django.E004",
                )
            ]
    return launcher.check()
