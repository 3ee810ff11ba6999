"""Django stand-ins for the chat and stream routes, which the ASGI consumers serve (issue 19).

:func:`helix_django.transport.routing.get_asgi_application` routes
``<prefix>sessions/<id>/chat`` and ``<prefix>sessions/<id>/stream`` to Channels consumers
before Django sees them. These views exist so the routes have URL names (``helix_django:chat``,
``helix_django:stream``) and a place in the OpenAPI schema; a request that reaches one
(a WSGI deployment, or an ``asgi.py`` without helix's routing) is refused with 501
``transport_route_not_wired`` instead of a misleading 404. System check ``W020`` reports
the same at start-up.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from helix_django.api.views import HelixAPIView
from helix_django.errors import RouteNotWiredError


class _NotWiredView(HelixAPIView):
    """Refuse every method with 501 ``transport_route_not_wired`` before authentication."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise RouteNotWiredError()


class ChatRouteView(_NotWiredView):
    """``GET``/``POST sessions/<id>/chat``: the chat route (served by ``ChatConsumer``)."""

    def get(self, request: Request, session_id: str) -> None:
        """Resume the session's stream (AI SDK UI message stream over SSE)."""
        raise RouteNotWiredError()

    def post(self, request: Request, session_id: str) -> None:
        """Send a turn and stream its run (AI SDK UI message stream over SSE)."""
        raise RouteNotWiredError()


class StreamRouteView(_NotWiredView):
    """``GET sessions/<id>/stream``: the raw stream route (served by ``StreamConsumer``)."""

    def get(self, request: Request, session_id: str) -> None:
        """Stream the session stream's chunks after the cursor as SSE frames."""
        raise RouteNotWiredError()
