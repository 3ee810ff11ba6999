"""Settings for the benchmarks (``python -m bench``): never the test database.

SQLite lives in its own temporary directory (WAL, ``synchronous=NORMAL``, IMMEDIATE
transactions: the embedded default). With ``HELIX_BENCH_DATABASE_URL`` (a PostgreSQL
URL) a second alias ``postgres`` is configured for the database stream manager on
PostgreSQL; with ``HELIX_BENCH_DEFAULT_DATABASE_URL`` the default database is that PostgreSQL
database, pooled like docs/production.md's several-process shape (the capacity section's
PostgreSQL servers, :mod:`bench.postgres`). ``HELIX_BENCH_OVERRIDES`` (JSON) is merged over ``HELIX`` (the e2e
section's daphne server). ``HELIX_BENCH_REDIS_URL`` (default ``redis://127.0.0.1:6379/14``) is the
Redis the Redis rows use; with django-eventstream installed its app is installed, database storage
(the peer route, :mod:`bench.peers`); with ``HELIX_BENCH_CHANNEL_LAYER_PREFIX`` the channel layer is
channels_redis on it, its keys under that prefix (the crossprocess section's servers).
"""

import importlib.util
import json
import os
import tempfile

BENCH_DIR = os.environ.get("HELIX_BENCH_DIR") or tempfile.mkdtemp(prefix="helix-bench-")
os.environ["HELIX_BENCH_DIR"] = BENCH_DIR  # a server subprocess started by a section shares the files
SQLITE_PATH = os.path.join(BENCH_DIR, "bench.sqlite3")

SECRET_KEY = "helix-bench-not-secret"  # noqa: S105
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "bench.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "rest_framework",
    "rest_framework.authtoken",
    "channels",
    "helix_django",
    "helix_django.contrib.daphne",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": SQLITE_PATH,
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }
}
DATABASE_URL = os.environ.get("HELIX_BENCH_DATABASE_URL", "")
if DATABASE_URL:
    import dj_database_url

    DATABASES["postgres"] = dj_database_url.parse(DATABASE_URL)
if os.environ.get("HELIX_BENCH_DEFAULT_DATABASE_URL"):
    import dj_database_url

    DATABASES["default"] = dj_database_url.parse(os.environ["HELIX_BENCH_DEFAULT_DATABASE_URL"], conn_max_age=0)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 2, "max_size": 10, "timeout": 5}}
REDIS_URL = os.environ.get("HELIX_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "helix": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    },
}
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
if os.environ.get("HELIX_BENCH_CHANNEL_LAYER_PREFIX"):  # the crossprocess section's servers
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 10}],
                "prefix": os.environ["HELIX_BENCH_CHANNEL_LAYER_PREFIX"],
            },
        }
    }
if importlib.util.find_spec("django_eventstream") is not None:  # the peer route (bench.peers)
    INSTALLED_APPS.append("django_eventstream")
    EVENTSTREAM_STORAGE_CLASS = "django_eventstream.storage.DjangoModelStorage"
ASGI_APPLICATION = "bench.asgi.application"
STATIC_URL = "/static/"
HELIX = {"ALLOW_ANONYMOUS": True}
# A daphne server started by a section gets its HELIX overrides (agents, pace) as JSON.
HELIX.update(json.loads(os.environ.get("HELIX_BENCH_OVERRIDES") or "{}"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("HELIX_BENCH_LOG_LEVEL", "WARNING")},
}
