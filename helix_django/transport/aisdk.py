"""The AI SDK's default route shape, so a stock ``useChat`` resumes with no custom code.

``DefaultChatTransport({ api })`` sends ``POST {api}`` with the body ``{id, messages,
trigger, messageId}`` and reconnects with ``GET {api}/{id}/stream``. With
``api = <prefix>chat`` these two routes serve that shape on top of the chat route
(:class:`~helix_django.transport.chat.ChatConsumer`), which stays at
``<prefix>sessions/<id>/chat``:

- ``POST <prefix>chat``: the session id is the body's ``id``. A send without
  ``X-Helix-Request-Key`` whose trailing message is a user message (and no ``messageId``:
  not an edit) gets a request key derived from that message's id, so a repeated send of
  the same user message attaches to the run it started (002, "Retried sends and request
  keys") instead of starting a second one; the same id with other content is 409
  ``state_request_key_conflict``.
- ``GET <prefix>chat/<id>/stream``: the chat route's resume. Without a cursor a live run
  is replayed from its start (``start {messageId}`` first, so the AI SDK rebuilds the
  message once); ``204`` once it ended, and also for a chat that does not exist yet (a
  new chat's page load, where the recipe calls the resume on mount).

Everything else (authentication, CSRF, ownership, typed refusals) is the chat route's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import MethodNotAllowedError, SessionNotFoundError, ValidationError
from helix_django.transport.chat import ChatConsumer
from helix_django.transport.host import send_refusal
from helix_django.transport.http import ClientDisconnected, Receive, header, read_body
from helix_django.transport.responses import Send, log_unexpected, send_empty

#: Prefix of the request keys derived from a user message id (valid ``X-Helix-Request-Key`` text).
IMPLIED_KEY_PREFIX = "uimsg:"


def implied_request_key(body: dict[str, Any]) -> str | None:
    """Return the request key a stock send implies (``uimsg:`` + 40 hex of the message id's SHA-256), or None.

    Only a ``submit-message`` whose trailing message is a user message and that edits no
    earlier message (no ``messageId``) implies one; tool results, regenerates and edits do not.
    """
    messages = body.get("messages")
    if body.get("trigger", "submit-message") != "submit-message" or body.get("messageId"):
        return None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    if last.get("role") != "user" or not isinstance(last.get("id"), str):
        return None
    # surrogatepass: a lone surrogate in the id is the chat route's typed 400 (``cause: json``), not a 500 here.
    return IMPLIED_KEY_PREFIX + hashlib.sha256(last["id"].encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _session_id_of(body: dict[str, Any]) -> str:
    session_id = body.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise ValidationError(gettext_lazy("The body names no chat id"), cause="session_id")
    return session_id


def _replayed(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body over once, then the client's own events."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay


def _with_route(scope: dict[str, Any], session_id: str, request_key: str | None) -> dict[str, Any]:
    headers = list(scope.get("headers", ()))
    if request_key is not None and header(scope, "x-helix-request-key") is None:
        headers.append((b"x-helix-request-key", request_key.encode("latin-1")))
    return {**scope, "headers": headers, "url_route": {"args": (), "kwargs": {"session_id": session_id}}}


class AISDKChatConsumer:
    """ASGI app of ``POST <prefix>chat``: the chat route with the session id from the body."""

    def __init__(self) -> None:
        self.chat = ChatConsumer()

    @classmethod
    def as_asgi(cls) -> AISDKChatConsumer:
        """Return an ASGI application instance (Channels' naming)."""
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Read the body's ``id`` (400 ``validation_error`` / ``session_id`` without one), then serve the chat route."""
        if scope["type"] != "http":
            raise ValueError("The chat route serves HTTP only")
        try:
            if scope["method"] != "POST":
                raise MethodNotAllowedError(allowed=("POST",))
            raw = await read_body(scope, receive, max_bytes=helix_settings.MAX_REQUEST_BYTES)
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise ValidationError(gettext_lazy("Malformed JSON body"), cause="json") from exc
            if not isinstance(body, dict):
                raise ValidationError(gettext_lazy("Invalid chat request body"), cause="body", field="body")
            session_id = _session_id_of(body)
            request_key = implied_request_key(body)
        except ClientDisconnected:
            return
        except Exception as exc:  # every refusal is typed; an unexpected one is rendered without its text
            log_unexpected("AI SDK chat route", exc)
            await send_refusal(send, scope, exc)
            return
        await self.chat(_with_route(scope, session_id, request_key), _replayed(raw, receive), send)


class AISDKStreamConsumer(ChatConsumer):
    """ASGI app of ``GET <prefix>chat/<id>/stream``: the chat route's resume; ``204`` for an unknown chat."""

    @classmethod
    def as_asgi(cls) -> AISDKStreamConsumer:
        """Return an ASGI application instance (Channels' naming)."""
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Serve a resume; any other method is 405 ``validation_method_not_allowed``."""
        if scope["type"] == "http" and scope["method"] != "GET":
            await send_refusal(send, scope, MethodNotAllowedError(allowed=("GET",)))
            return
        await super().__call__(scope, receive, send)

    async def refuse(
        self, send: Send, exc: BaseException, headers: list[tuple[bytes, bytes]], *, language: str | None = None
    ) -> None:
        """Answer ``204`` where the chat route answers 404: a chat that does not exist has nothing to resume."""
        if isinstance(exc, SessionNotFoundError):
            await send_empty(send, 204, headers=headers)
            return
        await super().refuse(send, exc, headers, language=language)
