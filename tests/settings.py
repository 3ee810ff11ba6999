"""Settings for the test suite: SQLite (WAL) by default, PostgreSQL with HELIX_TEST_DATABASE_URL."""

import os
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "helix-tests-not-secret"  # noqa: S105
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "tests.urls"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "channels",
    "django_tasks",
    "django_tasks_db",
    "helix_django",
    "helix_django.contrib.daphne",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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
_db_url = os.environ.get("HELIX_TEST_DATABASE_URL")
if _db_url:
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(_db_url)}
    # One test database per pytest process, so parallel runs never share one.
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("HELIX_PG_TEST_NAME") or f"test_helix_{os.getpid()}"}
else:
    # Each pytest process gets its own SQLite files, so parallel runs never share a test database.
    # A server process started by a test is pointed at the live test database with HELIX_SQLITE_PATH.
    _sqlite_path = os.environ.get("HELIX_SQLITE_PATH") or os.path.join(
        tempfile.gettempdir(), "helix-tests", f"{os.getpid()}.sqlite3"
    )
    os.makedirs(os.path.dirname(_sqlite_path), exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _sqlite_path,
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            "TEST": {"NAME": _sqlite_path.replace(".sqlite3", "-test.sqlite3")},
        }
    }
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Runs handed to task workers (HELIX["EXECUTOR"] = TasksExecutor) go through the database backend.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
ASGI_APPLICATION = "tests.asgi.application"
STATIC_URL = "/static/"
REDIS_URL = os.environ.get("HELIX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "helix": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    },
}
HELIX = {
    "FLUSH_INTERVAL_MS": 5,
    # A live server stopped at a test's teardown drains its live runs for at most 1 s, not 10.
    "DRAIN_SECONDS": 1,
}
# A server started by tests/live.py may get HELIX overrides as JSON.
if os.environ.get("HELIX_TEST_OVERRIDES"):
    import json

    HELIX = {**HELIX, **json.loads(os.environ["HELIX_TEST_OVERRIDES"])}
LOGGING = {"version": 1, "disable_existing_loggers": False}
