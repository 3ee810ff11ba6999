"""Settings of the example site: the embedded default of helix_django.

SQLite (WAL, IMMEDIATE transactions, a busy timeout), the in-memory channel layer, the
database stream manager and the scripted provider at a human pace, served by daphne.

Environment switches (all optional):

- ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL``: the default agent talks to that model through
  the OpenAI provider instead of the scripted one (``OPENAI_MODEL``, default ``gpt-4o-mini``).
- ``HELIX_DEMO_PACE``: the scripted provider's pace in tokens per second (default 40).
- ``DATABASE_URL``: another database (PostgreSQL) through dj-database-url, with Django's
  psycopg 3 connection pool (``HELIX_DB_POOL_SIZE`` connections per process, default 10).
- ``REDIS_URL``: the Redis channel layer and the Redis stream manager (scale-out).
- ``HELIX_SQLITE_PATH``: where the SQLite file lives (default ``var/example.sqlite3``).
- ``HELIX_CACHE_DIR``: the folder of the cache every process of the demo shares (default
  ``var/cache``; with ``REDIS_URL`` that cache is Redis): the scripted model's durable
  operations live there, so an answer outlives the server that started it.
- ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``, ``DJANGO_ALLOWED_HOSTS``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # Token authentication for API clients (a React app on another origin, scripts):
    # helix_django's chat route accepts DRF session and token authentication.
    "rest_framework.authtoken",
    "channels",
    "helix_django",
    # helix's patches of daphne (backpressure, HEAD bodies, form parsing): docs/deploy.md.
    "helix_django.contrib.daphne",
    "example_project.chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page's language from the browser's Accept-Language (or the language cookie), among LANGUAGES.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
ASGI_APPLICATION = "example_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "example_project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# --- database ---------------------------------------------------------------------------

if os.environ.get("DATABASE_URL"):
    import dj_database_url

    # No persistent connections (CONN_MAX_AGE 0): under ASGI every thread that touches the
    # ORM would keep one of its own. PostgreSQL gets Django's psycopg 3 pool instead, which
    # bounds the process's connections and replaces broken ones (docs/scale-out.md, "Connections").
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # A connection the database dropped while idle in the pool is replaced on checkout:
        # Django passes the pool ConnectionPool.check_connection when health checks are on.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 2,
            "max_size": int(os.environ.get("HELIX_DB_POOL_SIZE", "10")),
            # Seconds a request waits for a free connection (or for the database to come back)
            # before it fails with a typed, retryable 503.
            "timeout": 5,
        }
else:
    _sqlite_path = os.environ.get("HELIX_SQLITE_PATH") or str(BASE_DIR / "var" / "example.sqlite3")
    os.makedirs(os.path.dirname(_sqlite_path), exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _sqlite_path,
            "OPTIONS": {
                # WAL lets readers (snapshots, resumes) run next to the writing run;
                # IMMEDIATE takes the write lock up front so two writers queue instead of
                # failing with "database is locked" half-way through a transaction.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    }

# --- channels, streams ------------------------------------------------------------------

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    # redis-py 8's default 5 s socket timeout breaks channels_redis' blocking receive: set it above it.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10}]},
        }
    }
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "helix": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        },
    }
    _stream_manager = {
        "BACKEND": "helix_django.streams.redis.RedisStreamManager",
        "OPTIONS": {"CONNECTION_ALIAS": "helix"},
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # A cache on disk that every process of the demo shares, the server started after a kill
    # included: it keeps the scripted model's durable operations (see the provider below).
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "helix": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": os.environ.get("HELIX_CACHE_DIR") or str(BASE_DIR / "var" / "cache"),
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        },
    }
    _stream_manager = {"BACKEND": "helix_django.streams.database.DatabaseStreamManager", "OPTIONS": {}}

# --- helix ------------------------------------------------------------------------------

DEMO_PACE = float(os.environ.get("HELIX_DEMO_PACE", "40"))

if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
    _provider = {
        "BACKEND": "helix_django.runtime.providers.openai.OpenAIProvider",
        # API_KEY None: the provider reads OPENAI_API_KEY itself (a local server needs none).
        "OPTIONS": {"BASE_URL": os.environ.get("OPENAI_BASE_URL") or None, "API_KEY": None},
    }
    _model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
else:
    # DURABLE: each answer is an operation kept in the shared "helix" cache, which goes on
    # while no server is up; the relaunch scan of the next process finds it and finishes the
    # same answer from it (docs/deploy.md, "What a restart does to a live answer").
    _provider = {
        "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
        "OPTIONS": {"PACE_TPS": DEMO_PACE, "DURABLE": True, "CACHE_ALIAS": "helix"},
    }
    _model = "scripted-1"

HELIX = {
    "STREAM_MANAGERS": {"default": _stream_manager},
    # One process: a short lease lets the relaunch scan find a run of a killed server soon.
    "LEASE_SECONDS": 10,
    "LEASE_RENEW_SECONDS": 3,
    "AGENTS": {
        "default": {
            "PROVIDER": _provider,
            "MODEL": _model,
            "SYSTEM_PROMPT": "You are a helpful assistant.",
            "TOOLS": [],
            "MAX_STEPS": 8,
        },
    },
}

# --- auth, static, misc -----------------------------------------------------------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "helix_chat:index"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
# The languages helix_django ships (docs/i18n.md); a host lists its own.
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _not_the_http2_notice(record: logging.LogRecord) -> bool:
    """Drop daphne's start-up line "HTTP/2 support not enabled (install the http2 and tls ...)".

    The site is served over plain HTTP, where browsers never speak HTTP/2 (they use it over
    TLS only): nothing is missing, and the line read like a step left out of ``make demo``.
    """
    return not record.getMessage().startswith("HTTP/2 support not enabled")


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"not_http2_notice": {"()": "django.utils.log.CallbackFilter", "callback": _not_the_http2_notice}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "daphne.server": {"filters": ["not_http2_notice"]},
        "helix_django": {
            "handlers": ["console"],
            "level": os.environ.get("HELIX_LOG_LEVEL", "INFO"),
            "propagate": False,  # daphne configures the root logger too: log each line once
        },
    },
}
