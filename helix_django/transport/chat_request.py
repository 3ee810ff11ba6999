"""Parse one chat-route request: headers, cursor, then its body (002, "The canonical client").

Headers: ``X-Resume-From-Sequence`` (fallback ``Last-Event-ID``, then the
``resumeFromSequence`` query parameter), ``X-Existing-Message-Id``,
``X-Helix-Replay-Prefix: 1``, ``X-Helix-Request-Key`` and ``X-Helix-Multitask`` (the body
field ``multitask`` wins over it); each single-valued header given twice is refused. The
body is checked by :mod:`helix_django.transport.chat_body`. Every
failure is a ValidationError (400) that names the field, never its value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.errors import ValidationError
from helix_django.ids import validate_message_id, validate_request_key, validate_session_id
from helix_django.jsonbody import load_json, run_off_loop
from helix_django.runtime.multitask import parse_multitask
from helix_django.transport.chat_body import KNOWN_FIELDS, validate_body
from helix_django.transport.http import request_cursor, single_header


@dataclasses.dataclass
class ChatRequest:
    """One validated chat-route request."""

    session_id: str
    method: str
    """``GET`` or ``POST``."""
    cursor: int | None = None
    """The client's resume cursor (last sequence held), or None."""
    existing_message_id: str | None = None
    """``X-Existing-Message-Id``: the message the resumed stream writes into."""
    replay_prefix: bool = False
    """``X-Helix-Replay-Prefix: 1`` (C-1); only honoured with an existing message id."""
    request_key: str | None = None
    """``X-Helix-Request-Key`` of a send."""
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The UI messages of the body (empty for a resume)."""
    trigger: str = "submit-message"
    message_id: str | None = None
    """The body's ``messageId`` (an edited user message or the regenerated assistant message)."""
    multitask: str | None = None
    """What a send does if an answer is live: body ``multitask``, else ``X-Helix-Multitask`` (None: the agent's)."""

    @property
    def has_messages(self) -> bool:
        """Whether the body carries messages (a send or a tool-result continuation candidate)."""
        return bool(self.messages)


def parse_chat_request(scope: dict[str, Any], session_id: str, body: bytes) -> ChatRequest:
    """Validate the route's session id, resume headers, request key and body (POST only).

    Raises ValidationError (400); nothing is read from or written to the store. Runs the
    body's schema check inline: async callers use :func:`aparse_chat_request`.
    """
    request = parse_chat_headers(scope, session_id)
    if request.method == "POST" and body.strip():
        decoded = load_json(body, known_fields=KNOWN_FIELDS)
        _apply_body(request, validate_body(decoded))
        _apply_multitask(request, decoded)
    return request


#: The largest chat body whose schema check runs on the event loop (bounded work; see aparse_chat_request).
VALIDATE_ON_LOOP_BYTES = 16 * 1024


async def aparse_chat_request(scope: dict[str, Any], session_id: str, body: bytes) -> ChatRequest:
    """Like :func:`parse_chat_request`; the schema check of a body over VALIDATE_ON_LOOP_BYTES off the loop.

    A body of at most VALIDATE_ON_LOOP_BYTES is checked on the event loop: its check is
    bounded (0.5 ms for 16 KiB of empty parts, about 20 us for a typical send) and cheaper
    than the hop to the validation worker thread, which would delay the first byte.
    A longer one goes to that thread (docs/limits.md).
    """
    request = parse_chat_headers(scope, session_id)
    if request.method == "POST" and body.strip():
        decoded = load_json(body, known_fields=KNOWN_FIELDS)  # C-speed; holds the GIL on any thread
        if len(body) <= VALIDATE_ON_LOOP_BYTES:
            _apply_body(request, validate_body(decoded))
        else:
            _apply_body(request, await run_off_loop(validate_body, decoded))
        _apply_multitask(request, decoded)
    return request


def _apply_multitask(request: ChatRequest, decoded: Any) -> None:
    """Take the body's ``multitask`` field over the header's. Raises ValidationError (``cause: "multitask"``)."""
    if isinstance(decoded, dict) and "multitask" in decoded:
        request.multitask = parse_multitask(decoded["multitask"]) or request.multitask


def _apply_body(request: ChatRequest, parsed: tuple[list[dict[str, Any]], str, str | None, str | None]) -> None:
    request.messages, request.trigger, request.message_id, body_id = parsed
    if body_id is not None and body_id != request.session_id:
        raise ValidationError(gettext_lazy("The body's chat id does not match the URL"), cause="session_id_mismatch")
    if request.messages[-1]["role"] == "system":  # refused before the session is created
        raise ValidationError(gettext_lazy("The last message must be a user or assistant message"), cause="messages")


def parse_chat_headers(scope: dict[str, Any], session_id: str) -> ChatRequest:
    """Validate the route's session id, resume headers and request key; return a request without body.

    Raises ValidationError (400), ``cause: "duplicate_header"`` for a single-valued header given twice.
    """
    validate_session_id(session_id)
    method = scope.get("method", "GET").upper()
    request = ChatRequest(session_id=session_id, method=method)
    request.cursor = request_cursor(scope)
    existing = single_header(scope, "x-existing-message-id")
    if existing:
        request.existing_message_id = validate_message_id(existing)
    prefix = single_header(scope, "x-helix-replay-prefix")
    if prefix not in (None, "", "0", "1"):
        raise ValidationError(gettext_lazy("Invalid X-Helix-Replay-Prefix header"), cause="replay_prefix")
    request.replay_prefix = prefix == "1" and request.existing_message_id is not None
    key = single_header(scope, "x-helix-request-key")
    if key:
        request.request_key = validate_request_key(key)
    request.multitask = parse_multitask(single_header(scope, "x-helix-multitask"))
    return request
