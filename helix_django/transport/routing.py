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
  :class:`~helix_django.transport.websocket.SessionStreamConsumer` behind an
  ``OriginValidator``: the ``Origin`` must be one of ``ALLOWED_HOSTS`` or of
  django-cors-headers' ``CORS_ALLOWED_ORIGINS`` (the origins the host lets call its API) or
  absent (not a browser: it authenticates like any API client); the consumer admits the
  handshake and each message under helix's DRF policy itself (a ``Host`` that
  ``ALLOWED_HOSTS`` refuses is a refused handshake, 403);
- every other HTTP path: the Django app; every other WebSocket path: a typed ``not_found``
  error frame and close 4404.

The chat and stream consumers run the host's middleware themselves
(:mod:`helix_django.transport.host`); Django's middleware never applies to WebSockets.
"""

from __future__ import annotations

from typing import Any

from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.core.asgi import get_asgi_application as django_asgi_application
from django.urls import path, re_path
from django.urls.exceptions import Resolver404

from helix_django.transport.aisdk import AISDKChatConsumer, AISDKStreamConsumer
from helix_django.transport.chat import ChatConsumer
from helix_django.transport.stream import StreamConsumer
from helix_django.transport.websocket import SessionStreamConsumer, UnknownPathConsumer

SESSION_ID = "<str:session_id>"


def helix_http_routes(prefix: str = "helix/api/") -> list[Any]:
    """Return the Channels URL routes of the chat and raw stream routes under ``prefix``."""
    # Channels' URLRouter takes ASGI apps in Django's path(); the stubs expect a view.
    return [
        path(f"{prefix}sessions/{SESSION_ID}/chat", ChatConsumer.as_asgi(), name="helix-chat"),  # type: ignore[arg-type]
        path(f"{prefix}sessions/{SESSION_ID}/stream", StreamConsumer.as_asgi(), name="helix-stream"),  # type: ignore[arg-type]
        path(f"{prefix}chat", AISDKChatConsumer.as_asgi(), name="helix-aisdk-chat"),  # type: ignore[arg-type]
        path(f"{prefix}chat/{SESSION_ID}/stream", AISDKStreamConsumer.as_asgi(), name="helix-aisdk-stream"),  # type: ignore[arg-type]
    ]


def helix_websocket_routes(prefix: str = "helix/api/") -> list[Any]:
    """Return the Channels URL routes of the WebSocket consumer (``ws/<prefix>sessions/<id>/``)."""
    return [path(f"ws/{prefix}sessions/{SESSION_ID}/", SessionStreamConsumer.as_asgi(), name="helix-ws")]


def websocket_origins() -> list[str]:
    """Return the origins allowed to open the WebSocket: ``ALLOWED_HOSTS`` + ``CORS_ALLOWED_ORIGINS``.

    Like Channels' ``AllowedHostsOriginValidator`` (``DEBUG`` with no hosts allows localhost),
    plus the cross-origin apps the host already trusts with its HTTP API.
    """
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return [*hosts, *getattr(settings, "CORS_ALLOWED_ORIGINS", ())]


class NoOriginOrAllowed(OriginValidator):
    """Channels' ``OriginValidator`` that also lets through a handshake sending no ``Origin``.

    Browsers send ``Origin`` on every WebSocket handshake, so a cross-site page is always
    checked; a handshake without one is not a browser's (a script, a mobile app, a server)
    and cannot be a cross-site request: it authenticates like any API client (a token or
    JWT in ``Authorization``). Channels refuses it unless ``"*"`` is allowed, which would
    open the socket to every site.
    """

    def valid_origin(self, parsed_origin: Any) -> bool:
        """Whether ``parsed_origin`` is absent or one of the allowed origins."""
        return parsed_origin is None or super().valid_origin(parsed_origin)


class DirectURLRouter(URLRouter):
    """A Channels ``URLRouter`` whose call returns the routed app's coroutine.

    It routes as ``URLRouter`` does (the same patterns, ``path_remaining`` and
    ``url_route``), with two differences:

    - ``__call__`` is a plain function that returns the app's awaitable instead of awaiting
      it: the ``ProtocolTypeRouter`` above awaits the consumer directly, and an open
      response keeps one coroutine frame less (about 300 bytes of idle memory per response).
      Only for a router inside another one: an ASGI server looking at the outermost app's
      ``__call__`` would take a plain function for ASGI 2.
    - a ``root_path`` is removed from the path where the path starts with it, and the path is
      routed as it is where it does not, as Django's ASGI handler does: a server behind a
      prefix-stripping proxy (``daphne --root-path /app``) sends the path without it, which
      ``URLRouter`` refuses with a 500 for every request of the site.
    """

    def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:  # type: ignore[override]
        path = scope.get("path_remaining", scope.get("path", None))
        if path is None:
            raise ValueError("No 'path' key in connection scope, cannot route URLs")
        if "path_remaining" not in scope:  # the outermost router: the path below the root path
            path = path.removeprefix(scope.get("root_path", ""))
        path = path.lstrip("/")
        for route in self.routes:
            try:
                match = route.pattern.match(path)
            except Resolver404:
                continue
            if match:
                new_path, args, kwargs = match
                kwargs.update(route.default_args)
                outer = scope.get("url_route", {})
                url_route = {"args": outer.get("args", ()) + args, "kwargs": {**outer.get("kwargs", {}), **kwargs}}
                return route.callback(dict(scope, path_remaining=new_path, url_route=url_route), receive, send)
        if "path_remaining" in scope:
            raise Resolver404(f"No route found for path {path!r}.")
        raise ValueError(f"No route found for path {path!r}.")


def get_asgi_application(django_app: Any = None, *, prefix: str = "helix/api/") -> Any:
    """Return a ``ProtocolTypeRouter``: helix HTTP routes + Django over HTTP, the helix WebSocket.

    ``django_app`` defaults to ``django.core.asgi.get_asgi_application()``. Patches nothing
    of the server: a site served by daphne opts in to helix's daphne patches with
    ``"helix_django.contrib.daphne"`` in ``INSTALLED_APPS`` (:mod:`helix_django.contrib.daphne`).
    """
    if django_app is None:
        django_app = django_asgi_application()
    return ProtocolTypeRouter(
        {
            "http": DirectURLRouter([*helix_http_routes(prefix), re_path(r"^", django_app)]),
            "websocket": NoOriginOrAllowed(
                # any other path: the typed refusal (not_found frame, close 4404), never a 500
                DirectURLRouter([*helix_websocket_routes(prefix), re_path(r"", UnknownPathConsumer.as_asgi())]),
                websocket_origins(),
            ),
        }
    )


def __getattr__(name: str) -> Any:
    """Build ``websocket_urlpatterns`` / ``http_urlpatterns`` (default prefix) on first access."""
    if name == "websocket_urlpatterns":
        return helix_websocket_routes()
    if name == "http_urlpatterns":
        return helix_http_routes()
    raise AttributeError(name)
