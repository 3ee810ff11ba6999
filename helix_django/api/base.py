"""The base of helix's DRF views: helix's policy, wire, errors and caching on every endpoint.

:class:`HelixAPIView` applies the authentication, permission and throttle classes of
:mod:`helix_django.access.policy` (the host's DRF defaults unless HELIX names others;
throttle scope ``helix``), no versioning (helix's URLs are the same under any host
versioning scheme), helix's JSON renderer and parser ahead of the host's others
(:mod:`helix_django.api.wire`), CSRF on unsafe methods (anonymous cookie owners included),
:func:`helix_django.api.errors.helix_exception_handler` and Django's ``never_cache``
headers. A session the caller does not own is 404 ``state_session_not_found``.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from helix_django.access import policy
from helix_django.access.ownership import (
    Owner,
    enforce_anonymous_csrf,
    get_owned_session,
    is_signed_in,
    owned_sessions,
    owner_for,
)
from helix_django.api import wire
from helix_django.api.errors import TypedRefusals
from helix_django.api.schema import HelixAutoSchema
from helix_django.errors import HelixError, RouteNotFoundError, RunNotFoundError
from helix_django.limits import read_request_body
from helix_django.models import ChatSession, Run

#: Success responses only: :class:`~helix_django.api.schema.HelixAutoSchema` adds each operation's typed errors.
ERRORS: dict[int, Any] = {}


class HelixAPIView(TypedRefusals, APIView):
    """Base of every helix endpoint (see the module docstring)."""

    throttle_scope = policy.API_SCOPE
    versioning_class = None
    schema = HelixAutoSchema()
    operation_ids: dict[str, str] = {}
    """OpenAPI operation id by method (``{action}`` is the view's ``action``)."""
    error_statuses: dict[str, tuple[int, ...]] = {}
    """Refusal statuses by method beyond :data:`~helix_django.api.schema.COMMON_ERRORS` (default by method)."""

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        """Return the view function, outside the host's request transactions (``ATOMIC_REQUESTS``).

        Helix's store commits its own transactions, and a Stop or a tool result waits for
        the run's task to commit on another thread: inside a request transaction holding
        the database's write lock that wait lasted until the lock timed out (15-20 s, the
        result lost). Every alias is exempt (Django's ``transaction.non_atomic_requests``),
        so the host's setting applies to its own views only. DRF's ``as_view`` already
        exempts the view from ``LoginRequiredMiddleware``: it answers a typed 401 itself.
        """
        view = super().as_view(**initkwargs)
        for alias in connections:
            view = transaction.non_atomic_requests(using=alias)(view)
        return view

    def get_queryset(self) -> QuerySet[ChatSession]:
        """Return the caller's sessions (``ChatSession``), for a permission class that reads the view's queryset.

        ``DjangoModelPermissions`` (and its kin) take the model to check from it: helix's
        routes need the ``helix_django.*_chatsession`` permission of the method (a POST
        ``add``, a DELETE ``delete``). Empty for a caller without an owner, and while
        drf-spectacular builds the schema. Helix's own lookups stay owner-scoped
        (:mod:`helix_django.access.ownership`).
        """
        if getattr(self, "swagger_fake_view", False) or getattr(self, "request", None) is None:
            return ChatSession.objects.none()
        try:
            return owned_sessions(self.owner())
        except HelixError:
            return ChatSession.objects.none()

    def get_authenticators(self) -> list[Any]:
        """Return the authenticators of :func:`helix_django.access.policy.authenticators`."""
        return policy.authenticators()

    def get_permissions(self) -> list[Any]:
        """Return the permissions of :func:`helix_django.access.policy.permissions`."""
        return policy.permissions()

    def get_parsers(self) -> list[Any]:
        """Return :func:`helix_django.api.wire.parsers`: helix's JSON parser, then the host's non-JSON parsers."""
        return wire.parsers()

    def get_throttles(self) -> list[Any]:
        """Return the throttles of :func:`helix_django.access.policy.throttles` (helix's scopes always rated)."""
        return policy.throttles()

    def get_renderers(self) -> list[Any]:
        """Return :func:`helix_django.api.wire.renderers`: helix's JSON renderer, then the host's non-JSON renderers."""
        return wire.renderers()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Bound the body, authenticate, then enforce CSRF for anonymous cookie owners on unsafe methods.

        The body is read here, bounded by ``MAX_REQUEST_BYTES`` as on the chat route
        (:func:`helix_django.limits.read_request_body`): 413 ``validation_payload_too_large``
        over it, before authentication; Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` does not
        apply to helix's bodies.
        """
        read_request_body(request._request)
        super().initial(request, *args, **kwargs)
        if not is_signed_in(request.user):
            enforce_anonymous_csrf(request._request)

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        """Return DRF's finalized ``response`` with Django's ``never_cache`` headers.

        Every answer is live state (a snapshot, a run's status, another user's 404): one
        ``Cache-Control: max-age=0, no-cache, no-store, must-revalidate, private`` header
        (:func:`django.utils.cache.add_never_cache_headers`), so the host's cache middleware
        or a proxy never stores it and never serves it again.
        """
        response = super().finalize_response(request, response, *args, **kwargs)
        add_never_cache_headers(response)
        return response

    def owner(self, *, create: bool = False) -> Owner:
        """Return the caller's Owner (raises NotAuthenticatedError)."""
        return owner_for(self.request.user, getattr(self.request._request, "session", None), create_anonymous=create)

    def session(self, session_id: str) -> ChatSession:
        """Return the caller's session ``session_id`` or raise SessionNotFoundError (404)."""
        return get_owned_session(session_id, self.owner())


class HelixListView(HelixAPIView):
    """A list endpoint: paginated as :func:`helix_django.access.policy.pagination_class` says."""

    @property
    def pagination_class(self) -> type | None:
        """The paginator class (drf-spectacular reads it to describe the paginated shape)."""
        return policy.pagination_class()

    def list_response(self, queryset: QuerySet[Any], serializer: type[Serializer]) -> Response:
        """Return one page of ``queryset`` in the paginator's shape, else the newest ``LIST_LIMIT`` as a list.

        A page that does not exist is 404 ``not_found`` (``cause: "page"``), not a missing session.
        """
        cls = self.pagination_class
        if cls is not None:
            paginator = cls()
            try:
                page = paginator.paginate_queryset(queryset, self.request, view=self)
            except NotFound:
                raise RouteNotFoundError(gettext_lazy("Page not found"), cause="page") from None
            if page is not None:
                return paginator.get_paginated_response(serializer(page, many=True).data)
        return Response(serializer(queryset[: policy.LIST_LIMIT], many=True).data)


def run_of(session: ChatSession, run_id: str) -> Run:
    """Return the run ``run_id`` of ``session`` or raise RunNotFoundError (404)."""
    run = Run.objects.filter(pk=run_id, session=session).first()
    if run is None:
        raise RunNotFoundError()
    return run
