"""The OpenAPI description of helix's routes (drf-spectacular): operation ids, typed errors, SSE bodies.

:class:`HelixAutoSchema` is the ``schema`` of every helix view. It names each operation
(``listSessions``, ``sendChat``, ...; a view's ``operation_ids`` by method), and declares
on every operation the refusals it can answer, each with the one flat error body whose
``code`` is an enum of every wire code (:func:`wire_codes`); 429 and retryable 503 carry
``Retry-After`` (seconds). The WebSocket route cannot be an OpenAPI operation; the schema's
description names it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from helix_django.errors import HelixError

#: Refusals every operation can answer: authentication (401), permission and CSRF (403),
#: ownership (404), method (405), content negotiation (406), throttles (429), internal (500).
COMMON_ERRORS = (401, 403, 404, 405, 406, 429, 500)
#: What a request with a body adds: validation (400), size (413), media type (415), state (409).
BODY_ERRORS = (400, 409, 413, 415)

_REASONS = {
    400: "Invalid request (`validation_*`)",
    401: "Not authenticated, or the credentials failed (`auth_*`)",
    403: "Permission denied or CSRF check failed (`auth_permission_denied`)",
    404: "Unknown, or another owner's, session / run / stream (`state_*_not_found`, `stream_not_found`)",
    405: "Method not allowed (`validation_method_not_allowed`)",
    406: "No acceptable response type (`validation_not_acceptable`)",
    409: "The session's state refuses the request (`state_*`)",
    413: "Request body too large (`validation_payload_too_large`, `limitBytes`, `sizeBytes`)",
    415: "Unsupported media type (`validation_unsupported_media_type`)",
    429: "Throttled (`rate_limited`); retry after `Retry-After` seconds",
    500: "Internal error (`framework_internal_error`), its text never echoed",
    501: "The streaming route is not wired to helix's ASGI routing (`transport_route_not_wired`)",
    503: "Retryable: not live yet, history settling, stream unavailable (`Retry-After: 1`)",
}


#: Modules besides :mod:`helix_django.errors` that define HelixError subclasses (a test walks the
#: whole package and fails when one is missing here).
ERROR_MODULES = ("helix_django.runtime.providers.base", "helix_django.runtime.agents", "helix_django.api.views")


def wire_codes() -> list[str]:
    """Return every ``code`` a ``HelixError`` subclass can put on the wire, sorted."""
    for module in ERROR_MODULES:
        importlib.import_module(module)
    codes: set[str] = set()
    pending: list[type[HelixError]] = [HelixError]
    while pending:
        cls = pending.pop()
        codes.add(cls.code)
        pending.extend(cls.__subclasses__())
    return sorted(codes)


class HelixErrorBodySerializer(serializers.Serializer):
    """The flat typed error body of every refusal (STYLE, "Errors"; 002, "Wire errors")."""

    error = serializers.CharField(help_text="For people; never echoes a cause's text.")
    code = serializers.ChoiceField(choices=[], help_text="Stable machine code; released codes never change.")
    retryable = serializers.BooleanField(required=False)
    cause = serializers.CharField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["code"].choices = wire_codes()  # read when the schema is built: every error class is loaded


class HelixAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with helix's operation ids and per-operation typed errors."""

    def get_operation_id(self) -> str:
        """Return the view's ``operation_ids[method]`` (``{action}``: the view's, camelCased), else the default."""
        named = getattr(self.view, "operation_ids", {}).get(self.method)
        if named:
            action = getattr(self.view, "action", "") or ""
            return named.format(action=re.sub(r"_(\w)", lambda m: m.group(1).upper(), action))
        return super().get_operation_id()

    def error_statuses(self) -> tuple[int, ...]:
        """Return the refusal statuses of this operation: the view's ``error_statuses[method]`` or the defaults."""
        declared = getattr(self.view, "error_statuses", {}).get(self.method)
        if declared is not None:
            return tuple(sorted({*COMMON_ERRORS, *declared}))
        extra = BODY_ERRORS if self.method in ("POST", "PUT", "PATCH") else (409,) if self.method == "DELETE" else ()
        return tuple(sorted({*COMMON_ERRORS, *extra}))

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        body = self.resolve_serializer(HelixErrorBodySerializer(), "response").ref
        for status in self.error_statuses():
            response: dict[str, Any] = {
                "description": _REASONS[status],
                "content": {"application/json": {"schema": body}},
            }
            if status in (429, 503):
                response["headers"] = {
                    "Retry-After": {"schema": {"type": "integer", "minimum": 1}, "description": "Seconds to wait."}
                }
            responses[str(status)] = response
        return responses
