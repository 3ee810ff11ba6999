"""The DRF policy of every helix route: authentication, permission and throttle classes.

Each list is ``HELIX["AUTHENTICATION_CLASSES"]`` / ``["PERMISSION_CLASSES"]`` /
``["THROTTLE_CLASSES"]`` (import strings) when set, else the host's
``REST_FRAMEWORK["DEFAULT_*_CLASSES"]``, so a host that authenticates with JWT, OAuth or
Basic, or requires ``IsAuthenticated``, gets the same rules on helix's routes as on its own.
When the host never named its authentication classes, DRF's defaults (Session, Basic)
apply, plus ``TokenAuthentication`` where ``rest_framework.authtoken`` is installed.

The list endpoints (sessions, runs) paginate with ``HELIX["PAGINATION_CLASS"]`` when set
(``""``: never), else the host's ``DEFAULT_PAGINATION_CLASS`` (and its ``PAGE_SIZE``); with
neither, or a paginator that declines (``PageNumberPagination`` without a page size), they
answer the plain list of the newest :data:`LIST_LIMIT`.

Helix's throttle scopes (``helix`` for the REST endpoints, ``helix_chat`` for the chat and
stream routes) always have a rate: ``HELIX["THROTTLE_RATES"]`` (``None``: unlimited) under
the host's ``DEFAULT_THROTTLE_RATES``, so a host whose defaults hold ``ScopedRateThrottle``
without helix's scopes never gets ``ImproperlyConfigured``.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from rest_framework.authentication import TokenAuthentication
from rest_framework.settings import api_settings

from helix_django.conf import helix_settings, import_from_setting

#: Throttle scope of the REST endpoints.
API_SCOPE = "helix"
#: Throttle scope of the chat and raw stream routes.
CHAT_SCOPE = "helix_chat"
#: Most items of an unpaginated list (newest first).
LIST_LIMIT = 100


def _classes(helix_name: str, drf_name: str) -> list[type]:
    configured = getattr(helix_settings, helix_name)
    if configured is not None:
        return [import_from_setting(path, f"HELIX[{helix_name!r}]") for path in configured]
    return list(getattr(api_settings, drf_name))


def authentication_classes() -> list[type]:
    """Return the authentication classes of helix's routes (see the module docstring)."""
    configured = helix_settings.AUTHENTICATION_CLASSES
    host_named = "DEFAULT_AUTHENTICATION_CLASSES" in (getattr(settings, "REST_FRAMEWORK", None) or {})
    classes = _classes("AUTHENTICATION_CLASSES", "DEFAULT_AUTHENTICATION_CLASSES")
    if configured is None and not host_named and apps.is_installed("rest_framework.authtoken"):
        classes.append(TokenAuthentication)
    return classes


def authenticators() -> list[Any]:
    """Return one instance of each authentication class."""
    return [cls() for cls in authentication_classes()]


def authenticate_header(request: Any) -> str | None:
    """Return the ``WWW-Authenticate`` value of a 401 on helix's routes (None: the scheme has none).

    DRF's rule (``APIView.get_authenticate_header``): the first authentication class's
    ``authenticate_header`` (``Token``, ``Bearer realm="api"``, ``Basic realm="api"``);
    session authentication has none. RFC 9110 section 11.6.1 asks a 401 to carry it.
    """
    classes = authentication_classes()
    return classes[0]().authenticate_header(request) if classes else None


def permissions() -> list[Any]:
    """Return the permission instances of helix's routes (the host's defaults unless HELIX names them)."""
    return [cls() for cls in _classes("PERMISSION_CLASSES", "DEFAULT_PERMISSION_CLASSES")]


def pagination_class() -> type | None:
    """Return the paginator class of helix's list endpoints, or None (see the module docstring)."""
    configured = helix_settings.PAGINATION_CLASS
    if configured is None:
        return api_settings.DEFAULT_PAGINATION_CLASS
    if configured == "":
        return None
    return import_from_setting(configured, "HELIX['PAGINATION_CLASS']")


def throttle_rates() -> dict[str, Any]:
    """Return the host's ``DEFAULT_THROTTLE_RATES`` over helix's own scopes (``HELIX["THROTTLE_RATES"]``)."""
    return {**helix_settings.THROTTLE_RATES, **api_settings.DEFAULT_THROTTLE_RATES}


def throttles() -> list[Any]:
    """Return the throttle instances of helix's routes, each reading :func:`throttle_rates`.

    ``SimpleRateThrottle`` reads its rates from the class attribute ``THROTTLE_RATES``; the
    instance gets the merged dict before its rate is looked up, so helix's scopes exist.
    """
    rates = throttle_rates()
    result = []
    for cls in _classes("THROTTLE_CLASSES", "DEFAULT_THROTTLE_CLASSES"):
        throttle: Any = object.__new__(cls)
        if hasattr(cls, "THROTTLE_RATES"):
            throttle.THROTTLE_RATES = rates
        throttle.__init__()
        result.append(throttle)
    return result
