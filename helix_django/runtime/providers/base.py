"""The provider interface: an async stream of provider events plus optional capabilities.

A provider turns a :class:`ProviderRequest` (system prompt, provider-neutral messages,
tool specs) into an async iterator of events:

- :class:`TextDelta` / :class:`ReasoningDelta`: visible text and reasoning, in order;
- :class:`ToolCall`: one *complete* tool call (id, name, JSON arguments text);
- :class:`OperationStarted`: the provider's durable operation id, as soon as it is known;
- :class:`Finish`: the end of one model response, with its reason and usage.

A failure is raised as :class:`~helix_django.errors.ProviderError` (retryable or not, a
fixed message, never the provider's own text). A stream that ends without a Finish is a
drop: the caller treats it as an interrupted attempt.

Optional capabilities are declared, never assumed (000, "Whether these operations exist
is provider-specific"): ``supports_retrieve`` -> :meth:`BaseProvider.retrieve`,
``supports_cancel`` -> :meth:`BaseProvider.cancel`, ``supports_stream_from`` ->
:meth:`BaseProvider.stream_from`.

Provider-neutral messages follow the Chat Completions shape::

    {"role": "system"|"user"|"assistant"|"tool", "content": str,
     "tool_calls": [{"id", "name", "arguments": "<json>"}],   # assistant only
     "tool_call_id": str}                                      # tool only
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from django.utils.translation import gettext_lazy as _

from helix_django.errors import HelixError


@dataclasses.dataclass(frozen=True)
class TextDelta:
    """A piece of visible assistant text."""

    text: str


@dataclasses.dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning (summary) text."""

    text: str


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One complete tool call the model asked for."""

    id: str
    """The provider's call correlation id (not the side effect's idempotency identity)."""
    name: str
    arguments: str
    """The arguments as JSON text, exactly as the model produced them (may be invalid JSON)."""


@dataclasses.dataclass(frozen=True)
class OperationStarted:
    """The provider's durable operation id (e.g. an OpenAI background response id)."""

    operation_id: str
    sequence: int = 0
    """The provider's event position at this point (for ``stream_from``)."""


@dataclasses.dataclass(frozen=True)
class Finish:
    """The model response ended."""

    reason: str = "stop"
    """``stop``, ``tool-calls``, ``length``, ``content-filter`` or ``other`` (AI SDK finish reasons)."""
    usage: dict[str, int] = dataclasses.field(default_factory=dict)
    """``{"inputTokens", "outputTokens"}`` when the provider reports them."""


@dataclasses.dataclass(frozen=True)
class Progress:
    """A provider event position (``sequence``) reached; lets a caller resume with ``stream_from``."""

    sequence: int


ProviderEvent = TextDelta | ReasoningDelta | ToolCall | OperationStarted | Finish | Progress


@dataclasses.dataclass
class ToolSpec:
    """A tool offered to the model: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclasses.dataclass
class ProviderRequest:
    """One model call."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    """Provider-neutral messages (module docstring), oldest first, without the system prompt."""
    tools: list[ToolSpec] = dataclasses.field(default_factory=list)
    run_id: str = ""
    attempt_id: str = ""
    options: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class OperationResult:
    """What :meth:`BaseProvider.retrieve` found out about a durable operation."""

    status: str
    """``in_progress``, ``completed``, ``failed``, ``cancelled`` or ``unknown`` (no such operation)."""
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, int] = dataclasses.field(default_factory=dict)


class BaseProvider(abc.ABC):
    """A model backend. Configured per agent as ``{"BACKEND": path, "OPTIONS": {...}}``."""

    name: str = "provider"
    """Short provider name recorded on the run (``Run.provider``)."""
    supports_retrieve: bool = False
    """:meth:`retrieve` can read a durable operation's final state."""
    supports_cancel: bool = False
    """:meth:`cancel` can stop a durable operation."""
    supports_stream_from: bool = False
    """:meth:`stream_from` can replay an operation's events after a position."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    @abc.abstractmethod
    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Yield the events of one model response; raise ProviderError on failure."""

    def capabilities(self) -> frozenset[str]:
        """Return the optional capabilities: a subset of ``{"retrieve", "cancel", "stream_from"}``."""
        flags = {"retrieve": self.supports_retrieve, "cancel": self.supports_cancel}
        flags["stream_from"] = self.supports_stream_from
        return frozenset(name for name, on in flags.items() if on)

    async def retrieve(self, operation_id: str) -> OperationResult:
        """Return the current state of a durable operation (needs ``supports_retrieve``)."""
        raise CapabilityMissingError(cause="retrieve")

    async def cancel(self, operation_id: str) -> str:
        """Ask the provider to stop an operation; return ``cancelled``, ``already_finished`` or ``unknown``."""
        raise CapabilityMissingError(cause="cancel")

    def stream_from(self, operation_id: str, after: int) -> AsyncIterator[ProviderEvent]:
        """Yield an operation's events after position ``after`` (needs ``supports_stream_from``)."""
        raise CapabilityMissingError(cause="stream_from")

    async def aclose(self) -> None:
        """Release clients held by the provider."""
        return None


class CapabilityMissingError(HelixError):
    """A provider was asked for a capability it does not declare."""

    code = "provider_capability_missing"
    http_status = 409
    category = "provider"
    default_message = _("The provider does not support this operation")
