"""System checks of how the host site serves helix (issue 19): ASGI wiring and the DRF policy.

Check ids (listed in docs/checks.md):

- ``helix_django.W030``: ``ASGI_APPLICATION`` is unset (a WSGI-only deployment) or its
  application does not route the chat route to helix's consumers; the chat and stream
  routes then answer 501 ``transport_route_not_wired``.
- ``helix_django.E030``: a class of helix's DRF policy (:mod:`helix_django.api.policy`)
  cannot be imported or instantiated (a throttle without a rate, a misspelt path); every
  helix route would answer 500.
- ``helix_django.E031``: ``TokenAuthentication`` is configured without
  ``rest_framework.authtoken`` installed.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

#: Attributes through which ASGI routers and middleware expose what they wrap.
_INNER_ATTRS = ("inner", "application", "app")


def serves_helix_chat(app: Any, depth: int = 0) -> bool:
    """Whether the ASGI application ``app`` routes HTTP to helix's ``ChatConsumer`` (searched 12 levels deep)."""
    from helix_django.transport.chat import ChatConsumer

    if isinstance(app, ChatConsumer):
        return True
    if depth > 12 or app is None:
        return False
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict):
        return serves_helix_chat(mapping.get("http"), depth + 1)
    for route in getattr(app, "routes", None) or ():
        if serves_helix_chat(getattr(route, "callback", None), depth + 1):
            return True
    return any(serves_helix_chat(getattr(app, attr, None), depth + 1) for attr in _INNER_ATTRS if hasattr(app, attr))


@register(deploy=False)
def check_asgi_wiring(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W030 when the site's ASGI application does not serve helix's chat route."""
    path = getattr(settings, "ASGI_APPLICATION", None)
    hint = (
        "Serve the site with an ASGI server (daphne) and set ASGI_APPLICATION to an application built by "
        "helix_django.transport.routing.get_asgi_application() (README, 'Install')."
    )
    if not path:
        message = "ASGI_APPLICATION is not set: the chat and stream routes cannot stream."
        return [Warning(message, hint=hint, id="helix_django.W030")]
    try:
        app = import_string(path)
    except ImportError:
        return [Warning(f"ASGI_APPLICATION {path!r} cannot be imported.", hint=hint, id="helix_django.W030")]
    if serves_helix_chat(app):
        return []
    return [Warning(f"ASGI_APPLICATION {path!r} does not route helix's chat route.", hint=hint, id="helix_django.W030")]


@register()
def check_drf_policy(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E030 for a policy class helix cannot load or build; E031 for token auth without authtoken."""
    from helix_django.api import policy

    messages: list[Any] = []
    try:
        classes = policy.authentication_classes()
        policy.permissions()
        policy.throttles()
        policy.pagination_class()
    except (ImportError, ImproperlyConfigured) as exc:
        return [
            Error(
                f"helix's DRF policy cannot be built: {exc}",
                hint="Fix HELIX['AUTHENTICATION_CLASSES'|'PERMISSION_CLASSES'|'THROTTLE_CLASSES'|'THROTTLE_RATES'|"
                "'PAGINATION_CLASS'] or REST_FRAMEWORK's DEFAULT_*_CLASSES / DEFAULT_THROTTLE_RATES.",
                id="helix_django.E030",
            )
        ]
    from rest_framework.authentication import TokenAuthentication

    has_token = any(issubclass(cls, TokenAuthentication) for cls in classes)
    if has_token and not apps.is_installed("rest_framework.authtoken"):
        messages.append(
            Error(
                "TokenAuthentication is configured for helix's routes but rest_framework.authtoken is not installed.",
                hint="Add 'rest_framework.authtoken' to INSTALLED_APPS, or remove TokenAuthentication.",
                id="helix_django.E031",
            )
        )
    return messages
