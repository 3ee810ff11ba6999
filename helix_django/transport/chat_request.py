"""Parse and validate one chat-route request: headers, cursor, body (issue 4; 002, "The canonical client").

Headers: ``X-Resume-From-Sequence`` (fallback ``Last-Event-ID``, then the
``resumeFromSequence`` query parameter), ``X-Existing-Message-Id``,
``X-Helix-Replay-Prefix: 1`` and ``X-Helix-Request-Key``. The body is the one
``DefaultChatTransport`` sends, ``{id, messages, trigger, messageId}`` (plus any fields
of the client's ``body`` option), or only the new message (``{"message": UIMessage}``
or a bare UIMessage). Every failure is a ValidationError (400) that names the field,
never its value.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import fastjsonschema
import jsonschema

from helix_django.errors import ValidationError
from helix_django.ids import validate_message_id, validate_request_key, validate_session_id
from helix_django.transport.http import header, request_cursor

TRIGGERS = ("submit-message", "regenerate-message")

_ID = {"type": "string", "minLength": 1, "maxLength": 128}
UI_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "role", "parts"],
    "maxProperties": 16,
    "properties": {
        "id": _ID,
        "role": {"enum": ["user", "assistant", "system"]},
        "parts": {
            "type": "array",
            "maxItems": 2000,
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"type": "string", "minLength": 1, "maxLength": 100}},
                # The fields the model context reads (runtime/context.py) must have their types.
                "allOf": [
                    {
                        "if": {"properties": {"type": {"enum": ["text", "reasoning"]}}},
                        "then": {"required": ["text"], "properties": {"text": {"type": "string"}}},
                    },
                    {
                        "if": {"properties": {"type": {"pattern": "^(tool-|dynamic-tool$)"}}},
                        "then": {"required": ["toolCallId"], "properties": {"toolCallId": _ID}},
                    },
                ],
            },
        },
        "metadata": {"type": ["object", "null"]},
    },
}
BODY_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "maxProperties": 32,
    "properties": {
        "id": _ID,
        "messages": {"type": "array", "maxItems": 10_000, "items": UI_MESSAGE_SCHEMA},
        "message": UI_MESSAGE_SCHEMA,
        "trigger": {"enum": list(TRIGGERS)},
        "messageId": {"anyOf": [_ID, {"type": "null"}]},
    },
}
#: Accepts or refuses a body fast (the schema compiled to Python code by fastjsonschema).
_accept = fastjsonschema.compile(BODY_SCHEMA)
#: Explains a refusal: jsonschema's best match names the field (same schema, same draft).
_EXPLAIN = jsonschema.Draft7Validator(BODY_SCHEMA)
_KNOWN_FIELDS = frozenset(
    {"id", "messages", "message", "trigger", "messageId", "role", "parts", "type", "metadata", "text", "toolCallId"}
)


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

    @property
    def has_messages(self) -> bool:
        """Whether the body carries messages (a send or a tool-result continuation candidate)."""
        return bool(self.messages)


def _field_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) if isinstance(p, int) or p in _KNOWN_FIELDS else "*" for p in error.absolute_path]
    return ".".join(parts) or "body"


def parse_body(raw: bytes) -> tuple[list[dict[str, Any]], str, str | None, str | None]:
    """Return ``(messages, trigger, messageId, body id)`` of a JSON chat body.

    Raises ValidationError with ``cause`` ``json`` (not JSON), ``body`` (wrong shape, with
    ``field``) or ``messages`` (no message).
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nesting too deep
        raise ValidationError("Malformed JSON body", cause="json") from exc
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError) as exc:  # a lone surrogate ("\\ud800") is not storable text
        raise ValidationError("Malformed JSON body", cause="json") from exc
    if isinstance(body, dict) and "role" in body and "parts" in body and "messages" not in body:
        body = {"message": body}
    try:
        _accept(body)
    except fastjsonschema.JsonSchemaException:
        error = jsonschema.exceptions.best_match(_EXPLAIN.iter_errors(body))
        field = _field_path(error) if error is not None else "body"
        raise ValidationError("Invalid chat request body", cause="body", field=field) from None
    messages = list(body.get("messages") or [])
    if body.get("message") is not None:
        messages.append(body["message"])
    if not messages:
        raise ValidationError("The body holds no message", cause="messages")
    return messages, body.get("trigger", "submit-message"), body.get("messageId"), body.get("id")


def parse_chat_request(scope: dict[str, Any], session_id: str, body: bytes) -> ChatRequest:
    """Validate the route's session id, resume headers, request key and body (POST only).

    Raises ValidationError (400); nothing is read from or written to the store.
    """
    validate_session_id(session_id)
    method = scope.get("method", "GET").upper()
    request = ChatRequest(session_id=session_id, method=method)
    request.cursor = request_cursor(scope)
    existing = header(scope, "x-existing-message-id")
    if existing:
        request.existing_message_id = validate_message_id(existing)
    prefix = header(scope, "x-helix-replay-prefix")
    if prefix not in (None, "", "0", "1"):
        raise ValidationError("Invalid X-Helix-Replay-Prefix header", cause="replay_prefix")
    request.replay_prefix = prefix == "1" and request.existing_message_id is not None
    key = header(scope, "x-helix-request-key")
    if key:
        request.request_key = validate_request_key(key)
    if method == "POST" and body.strip():
        request.messages, request.trigger, request.message_id, body_id = parse_body(body)
        if body_id is not None and body_id != session_id:
            raise ValidationError("The body's chat id does not match the URL", cause="session_id_mismatch")
        if request.messages[-1]["role"] == "system":  # refused before the session is created
            raise ValidationError("The last message must be a user or assistant message", cause="messages")
    return request
