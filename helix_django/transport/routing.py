"""ASGI routing of helix_django: the chat and stream routes, the WebSocket, and Django for the rest.

A site's ``asgi.py``::

    import os
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    from django.core.asgi import get_asgi_application as django_asgi_app
    django_app = django_asgi_app()          # sets Django up before helix imports models
    from helix_django.transport.routing import get_asgi_application
    application = get_asgi_application(django_app, prefix="helix/api/")

``prefix`` must be where the site mounts ``helix_django.urls`` (the DRF endpoints). Routes:

- HTTP ``<prefix>sessions/<session_id>/chat``: :class:`~helix_django.transport.chat.ChatConsumer`;
- HTTP ``<prefix>sessions/<session_id>/stream``: :class:`~helix_django.transport.stream.StreamConsumer`;
- HTTP ``<prefix>chat`` and ``<prefix>chat/<session_id>/stream``: the AI SDK's default
  send and reconnect shape (:mod:`helix_django.transport.aisdk`), for a stock ``useChat``;
- WebSocket ``ws/<prefix>sessions/<session_id>/``:
  :class:`~helix_django.transport.websocket.SessionStreamConsumer` through
  ``AllowedHostsOriginValidator(AuthMiddlewareStack(...))``;
- every other HTTP path: the Django app.
"""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

SESSION_ID = "<str:session_id>"


def helix_http_routes(prefix: str = "helix/api/") -> list[Any]:
    """Return the Channels URL routes of the chat and raw stream routes under ``prefix``."""
    from helix_django.transport.aisdk import AISDKChatConsumer, AISDKStreamConsumer
    from helix_django.transport.chat import ChatConsumer
    from helix_django.transport.stream import StreamConsumer

    # Channels' URLRouter takes ASGI apps in Django's path(); the stubs expect a view.
    return [
        path(f"{prefix}sessions/{SESSION_ID}/chat", ChatConsumer.as_asgi(), name="helix-chat"),  # type: ignore[arg-type]
        path(f"{prefix}sessions/{SESSION_ID}/stream", StreamConsumer.as_asgi(), name="helix-stream"),  # type: ignore[arg-type]
        path(f"{prefix}chat", AISDKChatConsumer.as_asgi(), name="helix-aisdk-chat"),  # type: ignore[arg-type]
        path(f"{prefix}chat/{SESSION_ID}/stream", AISDKStreamConsumer.as_asgi(), name="helix-aisdk-stream"),  # type: ignore[arg-type]
    ]


def helix_websocket_routes(prefix: str = "helix/api/") -> list[Any]:
    """Return the Channels URL routes of the WebSocket consumer (``ws/<prefix>sessions/<id>/``)."""
    from helix_django.transport.websocket import SessionStreamConsumer

    return [path(f"ws/{prefix}sessions/{SESSION_ID}/", SessionStreamConsumer.as_asgi(), name="helix-ws")]


def get_asgi_application(django_app: Any = None, *, prefix: str = "helix/api/") -> Any:
    """Return a ``ProtocolTypeRouter``: helix HTTP routes + Django over HTTP, the helix WebSocket.

    ``django_app`` defaults to ``django.core.asgi.get_asgi_application()``. Under daphne,
    Twisted's own form parsing is turned off (:mod:`helix_django.transport.daphne_forms`).
    """
    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator

    from helix_django.transport.daphne_forms import disable_twisted_form_parsing

    disable_twisted_form_parsing()

    if django_app is None:
        from django.core.asgi import get_asgi_application as django_asgi_application

        django_app = django_asgi_application()
    return ProtocolTypeRouter(
        {
            "http": URLRouter([*helix_http_routes(prefix), re_path(r"^", django_app)]),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(helix_websocket_routes(prefix)))),
        }
    )


def __getattr__(name: str) -> Any:
    """Build ``websocket_urlpatterns`` / ``http_urlpatterns`` (default prefix) on first access."""
    if name == "websocket_urlpatterns":
        return helix_websocket_routes()
    if name == "http_urlpatterns":
        return helix_http_routes()
    raise AttributeError(name)
