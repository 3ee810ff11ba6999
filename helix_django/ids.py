"""Identifiers: minting and validating session, run, message and request-key ids."""

from __future__ import annotations

import re
import uuid
from typing import TypeGuard

from django.utils.translation import gettext_lazy

from helix_django.errors import ValidationError

_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_REQUEST_KEY_RE = re.compile(r"^[A-Za-z0-9_.:-]{8,128}$")


def new_id(prefix: str) -> str:
    """Return a fresh random id ``<prefix>_<32 hex>``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def is_valid_session_id(value: object) -> TypeGuard[str]:
    """Return whether ``value`` is a valid public session id (1-128 of ``[A-Za-z0-9_-]``)."""
    return isinstance(value, str) and bool(_ID_RE.match(value))


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a valid public session id (1-128 of ``[A-Za-z0-9_-]``).

    Raises ValidationError (``cause: session_id``); the value is never echoed.
    """
    if not is_valid_session_id(value):
        raise ValidationError(gettext_lazy("Invalid session id"), cause="session_id")
    return value


def validate_message_id(value: object) -> str:
    """Return ``value`` if it is a valid UI message id. Raises ValidationError (``cause: message_id``)."""
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isprintable():
        raise ValidationError(gettext_lazy("Invalid message id"), cause="message_id")
    return value


def validate_request_key(value: object) -> str:
    """Return ``value`` if it is a valid request key (8-128 of ``[A-Za-z0-9_.:-]``).

    Raises ValidationError (``cause: request_key``); the key is never echoed (002, "Wire errors").
    """
    if not isinstance(value, str) or not _REQUEST_KEY_RE.match(value):
        raise ValidationError(gettext_lazy("Invalid X-Helix-Request-Key header"), cause="request_key")
    return value


def parse_cursor(value: object) -> int | None:
    """Parse a resume cursor (a non-negative integer sequence) from a header or query value.

    The one place a cursor is parsed (STYLE, "cursor"). None or '' -> None.
    Raises ValidationError (``cause: cursor``) for anything else.
    """
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
        if number >= 2**63:  # beyond every backend's integer column
            raise ValidationError(gettext_lazy("Invalid resume cursor"), cause="cursor")
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 18:
        # isascii(): str.isdigit() is also true for "²" and other digits int() refuses
        number = int(value.strip())
    else:
        raise ValidationError(gettext_lazy("Invalid resume cursor"), cause="cursor")
    if number < 0:
        raise ValidationError(gettext_lazy("Invalid resume cursor"), cause="cursor")
    return number
