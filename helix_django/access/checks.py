"""System check of the access policy: anonymous chat that the permission classes refuse.

- ``helix_django.W008``: ``HELIX["ALLOW_ANONYMOUS"]`` is on, but a permission class of helix's
  routes (``HELIX["PERMISSION_CLASSES"]``, else the host's ``DEFAULT_PERMISSION_CLASSES``)
  refuses an anonymous ``POST``: the chat page lets anonymous visitors in and refuses every
  send they make with ``401 auth_not_authenticated``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.checks import CheckMessage, Warning, register
from django.http import HttpRequest
from rest_framework.request import Request

from helix_django.access.policy import permissions
from helix_django.conf import SettingImportError, helix_settings


def _refusing_permissions() -> list[str]:
    """Return the names of the permission classes that refuse an anonymous POST (one that raises is skipped)."""
    http = HttpRequest()
    http.method = "POST"
    request = Request(http)
    request.user = AnonymousUser()
    refusing = []
    for permission in permissions():
        try:
            allowed = permission.has_permission(request, None)
        except Exception:  # noqa: BLE001, S112 - a custom class that needs a view cannot be judged here
            continue
        if not allowed:
            refusing.append(f"{type(permission).__module__}.{type(permission).__qualname__}")
    return refusing


@register()
def check_anonymous_chat_is_permitted(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W008 when ``ALLOW_ANONYMOUS`` is on and helix's permission classes refuse an anonymous caller."""
    if not helix_settings.ALLOW_ANONYMOUS:
        return []
    try:
        refusing = _refusing_permissions()
    except SettingImportError:
        return []  # an unimportable class is check_settings' error
    if not refusing:
        return []
    return [
        Warning(
            f"HELIX['ALLOW_ANONYMOUS'] is on, but the permission classes of helix's routes refuse an "
            f"anonymous caller ({', '.join(refusing)}): anonymous visitors reach the chat page and "
            "every send is refused (401 auth_not_authenticated).",
            hint="Set HELIX['PERMISSION_CLASSES'] = ['rest_framework.permissions.AllowAny'] (each owner "
            "still reaches only their own sessions), or turn ALLOW_ANONYMOUS off.",
            id="helix_django.W008",
        )
    ]
