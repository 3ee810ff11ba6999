"""DRF endpoints: sessions, snapshot, runs, cancel, tool results, queued messages (002, "Wire errors").

Every view derives from :class:`~helix_django.api.base.HelixAPIView` (helix's policy, wire,
typed errors and ``Cache-Control: no-store``). A session the caller does not own is 404
``state_session_not_found`` everywhere.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from helix_django.access.ownership import owned_sessions
from helix_django.api.base import ERRORS, HelixAPIView, HelixListView, run_of
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
    SessionNotFoundError,
    TransportError,
)
from helix_django.ids import new_id
from helix_django.models import ChatSession, Run
from helix_django.runtime.executor import get_executor
from helix_django.snapshot import abuild_snapshot
from helix_django.store import delete_session, get_or_create_session
from helix_django.store.queued import remove_queued


class SnapshotUnavailableError(TransportError):
    """An unexpected snapshot failure, rendered without its text (002: ``Snapshot unavailable``)."""

    default_message = gettext_lazy("Snapshot unavailable")
    retryable = False

    def to_body(self) -> dict[str, Any]:
        """Return ``{error: 'Snapshot unavailable', code: 'transport_error'}``."""
        return {"error": self.message, "code": self.code}


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


@extend_schema(methods=["POST"], request=None, responses={200: RunSerializer, **ERRORS})
class RunCancelView(HelixAPIView):
    """``POST sessions/<id>/runs/<run_id>/cancel``: stop a run (a client abort is only a disconnect)."""

    operation_ids = {"POST": "cancelRun"}
    error_statuses = {"POST": (409,)}

    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        session = self.session(session_id)
        run_of(session, run_id)
        run = async_to_sync(get_executor().cancel)(session=session, run_id=run_id)
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
        run_of(session, run_id)
        body = ToolResultsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        results = [dict(item) for item in body.validated_data["results"]]
        handle = async_to_sync(get_executor().submit_tool_results)(session=session, run_id=run_id, results=results)
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


@extend_schema(methods=["DELETE"], request=None, responses={204: OpenApiResponse(description="Removed"), **ERRORS})
class QueuedMessageView(HelixAPIView):
    """``DELETE sessions/<id>/queued/<queued_message_id>``: take a queued message back before it starts.

    204 once removed (it never starts). 404 ``state_queued_message_not_found``; 409
    ``state_queued_message_not_queued`` (``cause``: ``started``, ``removed`` or ``refused``;
    ``runId`` when it started) for one that no longer waits.
    """

    operation_ids = {"DELETE": "removeQueuedMessage"}
    error_statuses = {"DELETE": (409,)}

    def delete(self, request: Request, session_id: str, queued_message_id: str) -> Response:
        session = self.session(session_id)
        remove_queued(session.pk, queued_message_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
