"""HelixError, the base of every typed refusal: its wire body and its stored detail.

Each subclass sets class attributes only (``code``, ``http_status``, ``retryable``,
``category``, ``default_message``). Messages are translated when read
(:attr:`HelixError.message`, :meth:`HelixError.to_body`, in the language active then);
:meth:`HelixError.to_detail` keeps the English text, as it is stored on a run once and read
by whoever opens the run later.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import override


class HelixError(Exception):
    """Base of every typed helix_django error.

    ``cause`` is a short machine-readable reason (``snapshot_unstable``), never free text.
    ``extra`` fields are merged into the wire body.
    """

    code: ClassVar[str] = "helix_error"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False
    category: ClassVar[str] = "internal"
    default_message: ClassVar[str | Promise] = _("Internal error")
    www_authenticate: str | None = None
    """A 401's ``WWW-Authenticate`` challenge (a response header, never in the body)."""

    def __init__(self, message: str | Promise | None = None, *, cause: str | None = None, **extra: Any) -> None:
        self._text = message or self.default_message
        self.cause = cause
        self.extra = extra
        super().__init__(str(self._text))

    @property
    def message(self) -> str:
        """The message for people, in the language active now (a lazy message is translated here)."""
        return str(self._text)

    @property
    def is_retryable(self) -> bool:
        """Whether a client may retry the same request (class default unless overridden)."""
        return self.retryable

    @property
    def status(self) -> int:
        """HTTP status of this error (002, ``httpStatusForHelixError``)."""
        return self.http_status

    def to_body(self) -> dict[str, Any]:
        """Return the flat wire body ``{error, code, retryable, cause?, **extra}``."""
        body: dict[str, Any] = {"error": self.message, "code": self.code, "retryable": self.is_retryable}
        if self.cause:
            body["cause"] = self.cause
        body.update(self.extra)
        return body

    def to_detail(self) -> dict[str, Any]:
        """Return the scrubbed ``errorDetail`` kept on a failed run: code, category, retryable."""
        with override(None):  # gettext with no language: the English msgid
            message = str(self._text)
        return {"code": self.code, "category": self.category, "retryable": self.is_retryable, "message": message}
