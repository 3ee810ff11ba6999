"""System checks of how the host site serves helix: ASGI wiring and the DRF policy.

Check ids (listed in docs/checks.md):

- ``helix_django.W030``: ``ASGI_APPLICATION`` is unset (a WSGI-only deployment; the hint
  names ``"daphne"`` first in ``INSTALLED_APPS``, so ``runserver`` serves ASGI) or its
  application does not route the chat route to helix's consumers, or routes it under
  another prefix than the URLconf mounts ``helix_django.urls`` at; the chat and stream
  routes then answer 501 ``transport_route_not_wired``.
- ``helix_django.E030``: a class of helix's DRF policy (:mod:`helix_django.access.policy`)
  cannot be imported or instantiated (a throttle without a rate, a misspelt path); every
  helix route would answer 500.
- ``helix_django.E031``: ``TokenAuthentication`` is configured without
  ``rest_framework.authtoken`` installed.
- ``helix_django.W031``: daphne serves the site (``daphne`` installed, or this process runs
  daphne) but ``helix_django.contrib.daphne`` is not installed: daphne's ``send`` does not
  wait for a client that stops reading, a ``HEAD`` gets body bytes after its headers, and
  Twisted parses form bodies on the event loop.
"""

from __future__ import annotations

import sys
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.urls import NoReverseMatch, reverse
from django.urls.exceptions import Resolver404
from rest_framework.authentication import TokenAuthentication

from helix_django.access import policy
from helix_django.conf import import_from_setting
from helix_django.transport.chat import ChatConsumer

#: Attributes through which ASGI routers and middleware expose what they wrap.
_INNER_ATTRS = ("inner", "application", "app")


def serves_helix_chat(app: Any) -> bool:
    """Whether the ASGI application ``app`` routes HTTP to helix's ``ChatConsumer`` under any path."""
    return routes_to_helix_chat(app, None)


def routes_to_helix_chat(app: Any, path: str | None, depth: int = 0) -> bool:
    """Whether ``app`` routes an HTTP request for ``path`` to helix's ``ChatConsumer``, as its routers would.

    Follows Channels' ``ProtocolTypeRouter`` (``http``), ``URLRouter`` patterns (each match
    hands the rest of the path on; ``path`` None: any route) and middleware
    (``inner``/``application``/``app``), 12 levels deep.
    """
    if isinstance(app, ChatConsumer):
        return True
    if depth > 12 or app is None:
        return False
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict):
        return routes_to_helix_chat(mapping.get("http"), path, depth + 1)
    routes = getattr(app, "routes", None)
    if routes:
        for route in routes:
            callback = getattr(route, "callback", None)
            if path is None:
                if routes_to_helix_chat(callback, None, depth + 1):
                    return True
                continue
            try:
                match = route.pattern.match(path.lstrip("/"))
            except Resolver404:
                continue
            if match:  # the first route that matches takes the request, as the router does
                return routes_to_helix_chat(callback, match[0], depth + 1)
        return False
    return any(routes_to_helix_chat(getattr(app, a, None), path, depth + 1) for a in _INNER_ATTRS if hasattr(app, a))


def _chat_path() -> str | None:
    """The chat route's path where the URLconf mounts ``helix_django.urls`` (None: it is not mounted)."""
    try:
        return reverse("helix_django:chat", kwargs={"session_id": "wiring_check"})
    except NoReverseMatch:
        return None


@register(deploy=False)
def check_asgi_wiring(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W030 when the site's ASGI application does not serve helix's chat route."""
    path = getattr(settings, "ASGI_APPLICATION", None)
    hint = (
        "Serve the site with an ASGI server (daphne) and set ASGI_APPLICATION to an application built by "
        "helix_django.transport.routing.get_asgi_application() (README, 'Install')."
    )
    if not path:
        message = (
            "ASGI_APPLICATION is not set: `manage.py runserver` serves WSGI and the chat and stream routes "
            "cannot stream."
        )
        unset_hint = (
            "Add 'daphne' to INSTALLED_APPS, first (runserver then serves ASGI), and set ASGI_APPLICATION to "
            "an application built by helix_django.transport.routing.get_asgi_application(), e.g. "
            "'mysite.asgi.application' (README, 'Install')."
        )
        return [Warning(message, hint=unset_hint, id="helix_django.W030")]
    try:
        app = import_from_setting(path, "ASGI_APPLICATION")
    except ImportError:
        return [Warning(f"ASGI_APPLICATION {path!r} cannot be imported.", hint=hint, id="helix_django.W030")]
    if not serves_helix_chat(app):
        message = f"ASGI_APPLICATION {path!r} does not route helix's chat route."
        return [Warning(message, hint=hint, id="helix_django.W030")]
    chat = _chat_path()
    if chat is not None and not routes_to_helix_chat(app, chat):
        message = (
            f"ASGI_APPLICATION {path!r} routes helix's chat route under another prefix than the URLconf "
            f"mounts helix_django.urls at ({chat!r} is not routed to it)."
        )
        hint = (
            "Pass get_asgi_application(prefix=...) the prefix of path('<prefix>', include('helix_django.urls')), "
            "with its trailing slash (README, 'Install')."
        )
        return [Warning(message, hint=hint, id="helix_django.W030")]
    return []


@register()
def check_drf_policy(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E030 for a policy class helix cannot load or build; E031 for token auth without authtoken."""
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


@register(deploy=False)
def check_daphne_patches(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W031 when daphne serves the site without ``helix_django.contrib.daphne`` installed.

    Daphne serves the site where ``daphne`` is in ``INSTALLED_APPS`` (its ``runserver``) or
    this process imported ``daphne.server`` (its CLI). Never imports daphne itself.
    """
    served_by_daphne = apps.is_installed("daphne") or "daphne.server" in sys.modules
    if not served_by_daphne or apps.is_installed("helix_django.contrib.daphne"):
        return []
    return [
        Warning(
            "daphne serves this site but helix's daphne patches are not installed: a client that stops reading "
            "makes the process buffer its whole replay, and a HEAD response can carry body bytes.",
            hint="Add 'helix_django.contrib.daphne' to INSTALLED_APPS (docs/deploy.md, 'Serving with daphne').",
            id="helix_django.W031",
        )
    ]
