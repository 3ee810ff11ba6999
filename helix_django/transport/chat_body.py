"""The chat body's shape and limits: decode, check and return its messages (002, "The canonical client").

The body is the one ``DefaultChatTransport`` sends, ``{id, messages, trigger, messageId}``
(plus any fields of the client's ``body`` option), or only the new message
(``{"message": UIMessage}`` or a bare UIMessage). Every failure is a ValidationError (400)
that names the field, never its value.

Bounded work: the body is decoded by :func:`helix_django.jsonbody.load_json`
(C-speed, NUL and lone surrogates refused), then cheap structural limits (messages,
parts per message, ``MAX_REQUEST_PARTS`` in all) refuse an oversized body before any
per-part work; the envelope's check and the parts' check (plain loops deciding exactly
as :data:`BODY_SCHEMA`, about 1 us a message or part; a test holds them to jsonschema's
verdict) run on the validation worker thread
(:func:`helix_django.transport.chat_request.aparse_chat_request`), and a refusal names the
first failure met, so no second walk of the body explains it.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import ValidationError
from helix_django.jsonbody import field_path, load_json

TRIGGERS = ("submit-message", "regenerate-message")

_ID = {"type": "string", "minLength": 1, "maxLength": 128}
MAX_MESSAGES = 10_000
"""Most messages in one body (the schema's ``maxItems``)."""
MAX_MESSAGE_PARTS = 2_000
"""Most parts in one message (the schema's ``maxItems``)."""
#: A part of one of these types must carry ``toolCallId`` (``re.search``, as JSON Schema's ``pattern``).
TOOL_PART_TYPE = "^(tool-|dynamic-tool$)"
PART_SCHEMA: dict[str, Any] = {
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
            "if": {"properties": {"type": {"pattern": TOOL_PART_TYPE}}},
            "then": {"required": ["toolCallId"], "properties": {"toolCallId": _ID}},
        },
    ],
}


def _message_schema(parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["id", "role", "parts"],
        "maxProperties": 16,
        "properties": {
            "id": _ID,
            "role": {"enum": ["user", "assistant", "system"]},
            "parts": {"type": "array", "maxItems": MAX_MESSAGE_PARTS, **parts},
            "metadata": {"type": ["object", "null"]},
        },
    }


def _body_schema(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "maxProperties": 32,
        "properties": {
            "id": _ID,
            "messages": {"type": "array", "maxItems": MAX_MESSAGES, "items": message},
            "message": message,
            "trigger": {"enum": list(TRIGGERS)},
            "messageId": {"anyOf": [_ID, {"type": "null"}]},
        },
    }


UI_MESSAGE_SCHEMA: dict[str, Any] = _message_schema({"items": PART_SCHEMA})
BODY_SCHEMA: dict[str, Any] = _body_schema(UI_MESSAGE_SCHEMA)
"""The chat body's JSON Schema (draft 7); :func:`validate_body` decides exactly as it does."""
_ROLES = ("user", "assistant", "system")
_tool_part_type = re.compile(TOOL_PART_TYPE)
#: Field names a refusal may name (any other key of a body is ``*``, never echoed).
KNOWN_FIELDS = frozenset(
    {
        "id",
        "messages",
        "message",
        "trigger",
        "messageId",
        "multitask",
        "role",
        "parts",
        "type",
        "metadata",
        "text",
        "toolCallId",
    }
)


def _too_many(field: str, limit: int) -> ValidationError:
    return ValidationError(gettext_lazy("Too many message parts"), cause="body", field=field, limitParts=limit)


def check_structure(body: Any) -> None:
    """Refuse a body with too many messages or parts, in O(messages) before any per-part work.

    At most :data:`MAX_MESSAGES` messages, :data:`MAX_MESSAGE_PARTS` parts in each and
    ``HELIX["MAX_REQUEST_PARTS"]`` in all. Raises ValidationError (400, ``cause: "body"``,
    ``field``, ``limitParts``); other shapes are left to the schema.
    """
    if not isinstance(body, dict):
        return
    messages = body.get("messages")
    if isinstance(messages, list) and len(messages) > MAX_MESSAGES:
        raise ValidationError(
            gettext_lazy("Too many messages"), cause="body", field="messages", limitMessages=MAX_MESSAGES
        )
    candidates = [(f"messages.{i}", m) for i, m in enumerate(messages)] if isinstance(messages, list) else []
    candidates.append(("message", body.get("message")))
    limit = helix_settings.MAX_REQUEST_PARTS
    total = 0
    for name, message in candidates:
        parts = message.get("parts") if isinstance(message, dict) else None
        if isinstance(parts, list):
            if len(parts) > MAX_MESSAGE_PARTS:
                raise _too_many(f"{name}.parts", MAX_MESSAGE_PARTS)
            total += len(parts)
            if total > limit:
                raise _too_many("messages" if name != "message" else "message.parts", limit)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 128


def _message_failure(message: Any) -> list[Any] | None:
    """Return the path (within ``message``) of its first failure of the message schema without parts rules."""
    if not isinstance(message, dict) or not {"id", "role", "parts"} <= message.keys() or len(message) > 16:
        return []
    if not _is_id(message["id"]):
        return ["id"]
    if not isinstance(message["role"], str) or message["role"] not in _ROLES:
        return ["role"]
    if not isinstance(message["parts"], list) or len(message["parts"]) > MAX_MESSAGE_PARTS:
        return ["parts"]
    if "metadata" in message and not (message["metadata"] is None or isinstance(message["metadata"], dict)):
        return ["metadata"]
    return None


def _messages_failure(messages: Any) -> list[Any] | None:
    """Return the path below ``messages`` of its first failure (``[]``: not a list, or too long), or None."""
    if not isinstance(messages, list) or len(messages) > MAX_MESSAGES:
        return []
    for index, message in enumerate(messages):
        failure = _message_failure(message)
        if failure is not None:
            return [index, *failure]
    return None


def _envelope_failure(body: Any) -> list[Any] | None:
    """Return the path of the first failure of :data:`BODY_SCHEMA` without its per-part rules, or None.

    In the schema's order: the body's type and size, then ``id``, ``messages`` (each
    message), ``message``, ``trigger``, ``messageId``. O(messages).
    """
    if not isinstance(body, dict) or len(body) > 32:
        return []
    if "id" in body and not _is_id(body["id"]):
        return ["id"]
    if "messages" in body:
        failure = _messages_failure(body["messages"])
        if failure is not None:
            return ["messages", *failure]
    if "message" in body:
        failure = _message_failure(body["message"])
        if failure is not None:
            return ["message", *failure]
    if "trigger" in body and (not isinstance(body["trigger"], str) or body["trigger"] not in TRIGGERS):
        return ["trigger"]
    if "messageId" in body and not (body["messageId"] is None or _is_id(body["messageId"])):
        return ["messageId"]
    return None


def _check_envelope(body: Any) -> None:
    failure = _envelope_failure(body)
    if failure is not None:
        raise ValidationError(
            gettext_lazy("Invalid chat request body"), cause="body", field=field_path(failure, KNOWN_FIELDS)
        )


def _part_failure(part: Any) -> str | None:
    """Return where ``part`` first fails :data:`PART_SCHEMA` (``""``: the part itself), or None if it passes."""
    if not isinstance(part, dict) or "type" not in part:
        return ""
    kind = part["type"]
    if not isinstance(kind, str) or not 1 <= len(kind) <= 100:
        return "type"
    if kind in ("text", "reasoning"):
        if "text" not in part:
            return ""
        return None if isinstance(part["text"], str) else "text"
    if _tool_part_type.search(kind):
        if "toolCallId" not in part:
            return ""
        call_id = part["toolCallId"]
        return None if isinstance(call_id, str) and 1 <= len(call_id) <= 128 else "toolCallId"
    return None


def _check_parts(body: dict[str, Any]) -> None:
    named = [(f"messages.{i}", m) for i, m in enumerate(body.get("messages") or ())]
    if body.get("message") is not None:
        named.append(("message", body["message"]))
    for name, message in named:
        for index, part in enumerate(message["parts"]):
            failure = _part_failure(part)
            if failure is not None:
                field = f"{name}.parts.{index}" + (f".{failure}" if failure else "")
                raise ValidationError(gettext_lazy("Invalid chat request body"), cause="body", field=field)


def validate_body(body: Any) -> tuple[list[dict[str, Any]], str, str | None, str | None]:
    """Return ``(messages, trigger, messageId, body id)`` of a decoded chat body.

    Raises ValidationError with ``cause`` ``body`` (wrong shape or too many parts, with
    ``field``) or ``messages`` (no message). Pure Python, about 1 us a part (at most
    ``MAX_REQUEST_PARTS``): async code calls it through :func:`run_off_loop`.
    """
    if isinstance(body, dict) and "role" in body and "parts" in body and "messages" not in body:
        body = {"message": body}
    check_structure(body)
    _check_envelope(body)
    _check_parts(body)
    messages = list(body.get("messages") or [])
    if body.get("message") is not None:
        messages.append(body["message"])
    if not messages:
        raise ValidationError(gettext_lazy("The body holds no message"), cause="messages")
    return messages, body.get("trigger", "submit-message"), body.get("messageId"), body.get("id")


def parse_body(raw: bytes | str) -> tuple[list[dict[str, Any]], str, str | None, str | None]:
    """Return ``(messages, trigger, messageId, body id)`` of a JSON chat body.

    Raises ValidationError with ``cause`` ``json`` (not UTF-8 JSON, a lone surrogate),
    ``nul_character`` (with ``field``), ``body`` (wrong shape, with ``field``) or
    ``messages`` (no message).
    """
    return validate_body(load_json(raw, known_fields=KNOWN_FIELDS))
