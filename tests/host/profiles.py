"""The "real host" settings with one ordinary host setting changed: ``HELIX_HOST_PROFILE`` names which.

A live server of the host site (:mod:`tests.host.sites`) runs with
``DJANGO_SETTINGS_MODULE=tests.host.profiles`` and ``HELIX_HOST_PROFILE=<name>``; each
profile is a setting a site installing helix_django commonly already has. Helix must obey it
on every surface (chat, AI SDK, raw stream, WebSocket, REST, admin) or ``check`` must name
the problem.
"""

import os

from tests.host.settings import *  # noqa: F403
from tests.host.settings import MIDDLEWARE, REST_FRAMEWORK

PROFILE = os.environ.get("HELIX_HOST_PROFILE", "plain")

HELIX = {**HELIX}  # noqa: F405 - a copy: a profile changes its own
#: A cache of the site's own, new for each live site (``HELIX_HOST_CACHE_DIR``), shared by its processes.
_SHARED_CACHE = {
    "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
    "LOCATION": os.environ.get("HELIX_HOST_CACHE_DIR", "/tmp/helix-host-cache"),
}

if PROFILE == "admin_only":
    REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"]}
elif PROFILE == "user_throttle":
    REST_FRAMEWORK = {
        **REST_FRAMEWORK,
        "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"user": "4/min"},
    }
    CACHES = {**CACHES, "default": _SHARED_CACHE}  # noqa: F405 - throttle counts the test process can clear
elif PROFILE == "ssl_redirect":
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
elif PROFILE == "signed_cookies":
    SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    HELIX = {**HELIX, "ALLOW_ANONYMOUS": True}
elif PROFILE == "anonymous":
    REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    HELIX = {**HELIX, "ALLOW_ANONYMOUS": True}
elif PROFILE == "cache_middleware":
    MIDDLEWARE = [
        "django.middleware.cache.UpdateCacheMiddleware",
        *MIDDLEWARE,
        "django.middleware.cache.FetchFromCacheMiddleware",
    ]
    CACHE_MIDDLEWARE_SECONDS = 600
    CACHES = {**CACHES, "default": _SHARED_CACHE}  # noqa: F405
elif PROFILE == "root_path":
    pass  # daphne runs with --root-path /app (sites.py); the proxy strips /app from the path
elif PROFILE == "model_permissions":
    REST_FRAMEWORK = {
        **REST_FRAMEWORK,
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.DjangoModelPermissions"],
    }
elif PROFILE == "envelope_renderer":
    REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_RENDERER_CLASSES": ["tests.host.drf_defaults.EnvelopeRenderer"]}
elif PROFILE == "form_parsers":
    REST_FRAMEWORK = {
        **REST_FRAMEWORK,
        "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.FormParser", "rest_framework.parsers.MultiPartParser"],
    }
elif PROFILE == "datetime_format":
    REST_FRAMEWORK = {**REST_FRAMEWORK, "DATETIME_FORMAT": "%d/%m/%Y %H:%M"}
elif PROFILE == "no_tz":
    USE_TZ = False
    TIME_ZONE = "Europe/Berlin"
elif PROFILE == "force_script_name":
    FORCE_SCRIPT_NAME = "/app"
elif PROFILE != "plain":
    raise RuntimeError(f"unknown HELIX_HOST_PROFILE {PROFILE!r}")
