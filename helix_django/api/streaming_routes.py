"""Django stand-ins for the chat and stream routes, which the ASGI consumers serve.

:func:`helix_django.transport.routing.get_asgi_application` routes
``<prefix>sessions/<id>/chat`` and ``<prefix>sessions/<id>/stream`` to Channels consumers
before Django sees them. These views exist so the routes have URL names (``helix_django:chat``,
``helix_django:stream``) and a place in the OpenAPI schema; a request that reaches one
(a WSGI deployment, or an ``asgi.py`` without helix's routing) is refused with 501
``transport_route_not_wired`` instead of a misleading 404. System check ``W030`` reports
the same at start-up.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request

from helix_django.api.base import HelixAPIView
from helix_django.errors import RouteNotWiredError
from helix_django.runtime.multitask import STRATEGIES


class NotWiredView(HelixAPIView):
    """Refuse every method with 501 ``transport_route_not_wired`` before authentication."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise RouteNotWiredError()


def _header(
    name: str, description: str, type_: Any = OpenApiTypes.STR, enum: list[str] | None = None
) -> OpenApiParameter:
    return OpenApiParameter(name, type_, OpenApiParameter.HEADER, required=False, description=description, enum=enum)


CURSOR_HEADERS = [
    _header("X-Resume-From-Sequence", "The last sequence the client holds (the cursor).", OpenApiTypes.INT),
    _header("Last-Event-ID", "The cursor, when X-Resume-From-Sequence is absent (EventSource).", OpenApiTypes.INT),
]
CHAT_HEADERS = [
    *CURSOR_HEADERS,
    _header("X-Existing-Message-Id", "The assistant message the client already shows (resume into it)."),
    _header("X-Helix-Replay-Prefix", "`1`: replay the message's chunks up to the cursor first (C-1)."),
    _header("X-Helix-Request-Key", "Idempotency key of a send; a retried send attaches to the same run."),
    _header(
        "X-Helix-Multitask",
        "What a send does while an answer is live: `reject` (409 state_already_running), `interrupt` "
        "(the live answer is stopped, its partial kept) or `enqueue` (202: the message is stored and starts "
        "when the answer ends); default: the agent's MULTITASK (reject).",
        enum=list(STRATEGIES),
    ),
]
UI_STREAM = OpenApiResponse(
    OpenApiTypes.STR,
    description="AI SDK UI message stream over SSE (`text/event-stream`, `x-vercel-ai-ui-message-stream: v1`); "
    "every chunk frame carries its sequence as `id:`; ends with `data: [DONE]` after a real terminal.",
)
QUEUED = inline_serializer(
    "QueuedSend",
    fields={
        "queued": inline_serializer(
            "QueuedMessage",
            fields={
                "queuedMessageId": serializers.CharField(help_text="Remove it with DELETE sessions/{id}/queued/{it}."),
                "messageId": serializers.CharField(help_text="The queued UI message's id."),
                "position": serializers.IntegerField(help_text="1: the next message to start."),
                "runId": serializers.CharField(help_text="The live run it waits for."),
                "duplicate": serializers.BooleanField(help_text="A keyed repeat of a send already queued."),
            },
        )
    },
)
CHAT_BODY = inline_serializer(
    "ChatRequest",
    fields={
        "id": serializers.CharField(help_text="The session id (the path's)."),
        "messages": serializers.ListField(child=serializers.DictField(), help_text="AI SDK UIMessages."),
        "trigger": serializers.ChoiceField(choices=["submit-message", "regenerate-message"], required=False),
        "messageId": serializers.CharField(required=False),
        "multitask": serializers.ChoiceField(
            choices=list(STRATEGIES), required=False, help_text="X-Helix-Multitask's value; the body field wins."
        ),
    },
)


@extend_schema(methods=["GET"], parameters=CHAT_HEADERS, responses={(200, "text/event-stream"): UI_STREAM, 204: None})
@extend_schema(
    methods=["POST"],
    parameters=CHAT_HEADERS,
    request=CHAT_BODY,
    responses={(200, "text/event-stream"): UI_STREAM, (202, "application/json"): QUEUED},
)
class ChatRouteView(NotWiredView):
    """``GET``/``POST sessions/<id>/chat``: the chat route (served by ``ChatConsumer``)."""

    operation_ids = {"GET": "resumeChat", "POST": "sendChat"}
    error_statuses = {"GET": (400, 409, 501, 503), "POST": (400, 409, 413, 415, 501, 503)}

    def get(self, request: Request, session_id: str) -> None:
        """Resume the session's stream (AI SDK UI message stream over SSE)."""
        raise RouteNotWiredError()

    def post(self, request: Request, session_id: str) -> None:
        """Send a turn and stream its run (AI SDK UI message stream over SSE)."""
        raise RouteNotWiredError()


RAW_STREAM = OpenApiResponse(
    OpenApiTypes.STR,
    description="SSE frames `{type: 'chunk', sequence, chunk}` with `id: <sequence>`, "
    "then `event: end` or `event: fail`.",
)


@extend_schema(
    methods=["GET"],
    parameters=[
        *CURSOR_HEADERS,
        OpenApiParameter("resumeFromSequence", OpenApiTypes.INT, OpenApiParameter.QUERY, required=False),
    ],
    responses={(200, "text/event-stream"): RAW_STREAM},
)
class StreamRouteView(NotWiredView):
    """``GET sessions/<id>/stream``: the raw stream route (served by ``StreamConsumer``)."""

    operation_ids = {"GET": "streamSession"}
    error_statuses = {"GET": (400, 501, 503)}

    def get(self, request: Request, session_id: str) -> None:
        """Stream the session stream's chunks after the cursor as SSE frames."""
        raise RouteNotWiredError()
