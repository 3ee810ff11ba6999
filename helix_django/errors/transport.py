"""Failures of the way a request or stream travels: draining, drops, unreachable backends, routes (503/404/501/429)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from helix_django.errors.base import HelixError


class TransportError(HelixError):
    """A transport-level failure; retryable (503)."""

    code = "transport_error"
    http_status = 503
    retryable = True
    category = "transport"
    default_message = _("Transport error")


class ServerDrainingError(TransportError):
    """This process is stopping (SIGTERM) and starts no run; send again (another process takes it)."""

    code = "transport_server_draining"
    default_message = _("The server is restarting; send again")


class StreamDropError(TransportError):
    """The stream ended without a terminal, or a resumed run never went live (002)."""

    code = "transport_stream_drop"
    default_message = _("The stream was interrupted; resume from your cursor")


class StreamConnectionError(TransportError):
    """A stream manager's backend could not be reached; never read as "absent" (002, CP-28)."""

    code = "transport_stream_connection"
    default_message = _("The stream backend is unavailable")


class StreamNotFoundError(HelixError):
    """The raw stream route was asked for a stream that does not exist (002: 404)."""

    code = "stream_not_found"
    http_status = 404
    category = "transport"
    default_message = _("Stream not found")


class RouteNotFoundError(HelixError):
    """No helix endpoint at this path (404): unknown paths under the API prefix answer typed JSON too."""

    code = "not_found"
    http_status = 404
    category = "validation"
    default_message = _("Not found")


class RouteNotWiredError(HelixError):
    """A chat or stream request reached Django's URLconf: the site's ASGI routing does not serve it (501).

    The chat and stream routes stream from ASGI consumers; a WSGI deployment, or an
    ``asgi.py`` without :func:`helix_django.transport.routing.get_asgi_application`, lands here.
    """

    code = "transport_route_not_wired"
    http_status = 501
    category = "transport"
    default_message = _("This route needs helix_django's ASGI routing (see the README's install section)")


class RateLimitedError(HelixError):
    """Too many requests (DRF throttling)."""

    code = "rate_limited"
    http_status = 429
    retryable = True
    category = "transport"
    default_message = _("Too many requests")


class BudgetExceededError(RateLimitedError):
    """A run would start past a token or cost budget (``HELIX["BUDGET_CLASSES"]``, :mod:`helix_django.budgets`).

    429, retryable: ``scope`` (the budget's, e.g. ``user``, ``site``, ``user_cost``) and
    ``retryAfterSeconds`` (when the window frees enough), also sent as ``Retry-After``.
    Refused before the run-start commit: nothing is stored.
    """

    code = "budget_exceeded"
    default_message = _("The usage budget is spent; try again later")
