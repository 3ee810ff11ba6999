"""DRF endpoints: sessions, snapshot, runs, cancel, tool results (002, "Wire errors").

Every view derives from :class:`HelixAPIView`: the authentication, permission and
throttle classes of :mod:`helix_django.access.policy` (the host's DRF defaults unless HELIX
names others; throttle scope ``helix``), no versioning (helix's URLs are the same under
any host versioning scheme), helix's JSON renderer and parser ahead of the host's others
(:mod:`helix_django.api.wire`), CSRF on unsafe methods (anonymous cookie owners included),
and :func:`helix_django.api.errors.helix_exception_handler`. A
session the caller does not own is 404 ``state_session_not_found`` everywhere. Every answer
is ``Cache-Control: no-store`` (Django's ``never_cache`` headers).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
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
from helix_django.api.serializers import (
    RunSerializer,
    SessionCreateSerializer,
    SessionSerializer,
    SnapshotSerializer,
    ToolResultsSerializer,
)
from helix_django.errors import (
    AlreadyRunningError,
    HelixError,
    RouteNotFoundError,
    RunNotFoundError,
    SessionNotFoundError,
    TransportError,
)
from helix_django.ids import new_id
from helix_django.limits import read_request_body
from helix_django.models import ChatSession, Run
from helix_django.snapshot import abuild_snapshot
from helix_django.store import delete_session, get_or_create_session

#: Success responses only: :class:`~helix_django.api.schema.HelixAutoSchema` adds each operation's typed errors.
ERRORS: dict[int, Any] = {}


class SnapshotUnavailableError(TransportError):
    """An unexpected snapshot failure, rendered without its text (002: ``Snapshot unavailable``)."""

    default_message = gettext_lazy("Snapshot unavailable")
    retryable = False

    def to_body(self) -> dict[str, Any]:
        """Return ``{error: 'Snapshot unavailable', code: 'transport_error'}``."""
        return {"error": self.message, "code": self.code}


def _executor() -> Any:
    from helix_django.runtime.executor import get_executor

    return get_executor()


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


@extend_schema(methods=["GET"], responses={200: SessionSerializer(many=True), **ERRORS})
@extend_schema(
    methods=["POST"],
    request=SessionCreateSerializer,
    responses={200: SessionSerializer, 201: SessionSerializer, **ERRORS},
)
class SessionListView(HelixListView):
    """``GET sessions/``: the caller's sessions, newest first (paginated as the host's); ``POST``: create one."""

    operation_ids = {"GET": "listSessions", "POST": "createSession"}

    def get(self, request: Request) -> Response:
        return self.list_response(owned_sessions(self.owner()).order_by("-updated_at", "-pk"), SessionSerializer)

    def post(self, request: Request) -> Response:
        body = SessionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        owner = self.owner(create=True)
        session, created = get_or_create_session(
            body.validated_data.get("id") or new_id("chat"), owner_id=owner.user_id, anonymous_key=owner.anonymous_key
        )
        if not owner.owns(session):
            raise SessionNotFoundError()
        if created and body.validated_data.get("title"):
            ChatSession.objects.filter(pk=session.pk).update(title=body.validated_data["title"])
            session.refresh_from_db()
        return Response(SessionSerializer(session).data, status=201 if created else 200)


@extend_schema(methods=["GET"], responses={200: SessionSerializer, **ERRORS})
@extend_schema(methods=["DELETE"], responses={204: None, **ERRORS})
class SessionDetailView(HelixAPIView):
    """``GET sessions/<id>/``: one session; ``DELETE``: delete it (409 while a run is live)."""

    operation_ids = {"GET": "getSession", "DELETE": "deleteSession"}

    def get(self, request: Request, session_id: str) -> Response:
        return Response(SessionSerializer(self.session(session_id)).data)

    @staticmethod
    def _current_run(session: ChatSession) -> Run | None:
        return Run.objects.filter(pk=session.current_run_id).first() if session.current_run_id else None

    def delete(self, request: Request, session_id: str) -> Response:
        session = self.session(session_id)
        current = self._current_run(session)
        if session.current_run_id and current is None:
            # The run vanished since the read (a concurrent delete, or the id reused since):
            # read the session again, owner checked (404 once it is gone or someone else's).
            session = self.session(session_id)
            current = self._current_run(session)
        if current is not None and current.is_live:
            raise AlreadyRunningError()
        delete_session(session.pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(methods=["GET"], responses={200: SnapshotSerializer, **ERRORS})
class SnapshotView(HelixAPIView):
    """``GET sessions/<id>/snapshot``: the FrontendSnapshot (002, "Snapshots").

    200 snapshot; 404 ``state_session_not_found``; a HelixError keeps its status and code
    (503 retryable ``state_history_incomplete``, 409 ``corrupt_row``); anything else is
    ``{error: 'Snapshot unavailable', code: 'transport_error'}`` (503), its text never echoed.
    """

    operation_ids = {"GET": "getSnapshot"}
    error_statuses = {"GET": (409, 503)}

    def get(self, request: Request, session_id: str) -> Response:
        session = self.session(session_id)
        try:
            snapshot = async_to_sync(abuild_snapshot)(session.pk)
        except HelixError:
            raise
        except Exception as exc:
            raise SnapshotUnavailableError() from exc
        if snapshot is None:
            raise SessionNotFoundError()
        return Response(snapshot)


@extend_schema(methods=["GET"], responses={200: RunSerializer(many=True), **ERRORS})
class RunListView(HelixListView):
    """``GET sessions/<id>/runs/``: the session's runs, newest first (paginated like the host's lists)."""

    operation_ids = {"GET": "listRuns"}

    def get(self, request: Request, session_id: str) -> Response:
        session = self.session(session_id)
        return self.list_response(Run.objects.filter(session=session).order_by("-created_at", "-pk"), RunSerializer)


def _run_of(session: ChatSession, run_id: str) -> Run:
    run = Run.objects.filter(pk=run_id, session=session).first()
    if run is None:
        raise RunNotFoundError()
    return run


@extend_schema(methods=["POST"], request=None, responses={200: RunSerializer, **ERRORS})
class RunCancelView(HelixAPIView):
    """``POST sessions/<id>/runs/<run_id>/cancel``: stop a run (a client abort is only a disconnect)."""

    operation_ids = {"POST": "cancelRun"}
    error_statuses = {"POST": (409,)}

    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        session = self.session(session_id)
        _run_of(session, run_id)
        run = async_to_sync(_executor().cancel)(session=session, run_id=run_id)
        return Response(RunSerializer(run).data)


@extend_schema(
    methods=["POST"],
    request=ToolResultsSerializer,
    responses={200: OpenApiResponse(description="Submit accepted"), **ERRORS},
)
class ToolResultsView(HelixAPIView):
    """``POST sessions/<id>/runs/<run_id>/tool-results``: submit client-tool results and approvals.

    200 ``{runId, continued, responseMessageId?, fromSequence?}``: ``continued`` is false
    while the batch is partial (the run waits for the rest). 409 ``state_run_superseded``
    for a late submit; 400 ``validation_error`` for an invalid result.
    """

    operation_ids = {"POST": "submitToolResults"}

    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        session = self.session(session_id)
        _run_of(session, run_id)
        body = ToolResultsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        results = [dict(item) for item in body.validated_data["results"]]
        handle = async_to_sync(_executor().submit_tool_results)(session=session, run_id=run_id, results=results)
        if handle is None:
            return Response({"runId": run_id, "continued": False})
        return Response(
            {
                "runId": handle.run_id,
                "continued": True,
                "responseMessageId": handle.response_message_id,
                "fromSequence": handle.from_sequence,
            }
        )


@extend_schema(exclude=True)
class RouteNotFoundView(HelixAPIView):
    """Any other path under the API prefix: a typed 404 ``{error, code: "not_found"}``, never Django's HTML page."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise RouteNotFoundError()
