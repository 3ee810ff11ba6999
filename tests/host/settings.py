"""The "real host" test profile (issue 19): a site with its own user model, auth, CORS, DRF defaults and storage.

- ``AUTH_USER_MODEL`` with email as ``USERNAME_FIELD`` (no ``username``);
- JWT (djangorestframework-simplejwt) and session authentication, ``IsAuthenticated``;
- django-cors-headers for a cross-origin React app at ``http://app.example``;
- ``ScopedRateThrottle``, ``URLPathVersioning`` (``ALLOWED_VERSIONS``) and
  ``PageNumberPagination`` (``PAGE_SIZE`` 2) in the DRF defaults;
- ``ManifestStaticFilesStorage``; host routes after ``include("helix_django.urls")``;
- a strict ``ALLOWED_HOSTS``.

Run with ``pytest --ds=tests.host.settings tests/host`` (scripts/test.sh does).
"""

import os
import tempfile

from corsheaders.defaults import default_headers

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, MIDDLEWARE

SECRET_KEY = "helix-host-profile-tests-not-secret-0123456789abcdef"  # noqa: S105 - 32+ bytes for HS256
ROOT_URLCONF = "tests.host.urls"
ASGI_APPLICATION = "tests.host.asgi.application"
ALLOWED_HOSTS = ["api.example", "testserver", "localhost", "127.0.0.1"]
INSTALLED_APPS = ["corsheaders", *INSTALLED_APPS, "tests.host.accounts"]
AUTH_USER_MODEL = "accounts.User"
MIDDLEWARE = [
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    *MIDDLEWARE,
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
CORS_ALLOWED_ORIGINS = ["http://app.example"]
CORS_ALLOW_HEADERS = (
    *default_headers,
    "last-event-id",
    "x-resume-from-sequence",
    "x-existing-message-id",
    "x-helix-replay-prefix",
    "x-helix-request-key",
)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework_simplejwt.authentication.JWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"host_reports": "100/min"},
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.URLPathVersioning",
    "ALLOWED_VERSIONS": ["v1", "v2"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 2,
}
#: The test process's own; its live servers are given it (``HELIX_HOST_STATIC_ROOT``) to serve its manifest.
STATIC_ROOT = os.environ.get("HELIX_HOST_STATIC_ROOT") or os.path.join(
    tempfile.gettempdir(), "helix-tests", f"static-{os.getpid()}"
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}
