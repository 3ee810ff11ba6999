"""Usage: what a run's model calls cost in tokens, as the provider reported it or estimated.

A run's usage (``Run.usage``) is one record, written with every step commit and with its
terminal commit, so an interruption never loses what its completed model calls cost::

    {"inputTokens": int, "outputTokens": int, "reasoningTokens": int, "cachedTokens": int,
     "source": "reported" | "estimated" | "partly_estimated", "estimatedTokens": int,
     "countedChars": int}

``reported``: every token counted came from the provider (Chat Completions'
``stream_options.include_usage``, the Responses API's ``response.completed``);
``estimated``: none did; ``partly_estimated``: the provider reported some model calls and
text it never reported (an attempt cut off or retried, a call the process died in) was
estimated. ``estimatedTokens``: the part of ``outputTokens`` that was estimated.
``countedChars``: the response message's text and reasoning characters the record covers
(reported or estimated), so only characters after them are estimated later.

The estimator (:func:`estimate_tokens`) counts one output token per four characters, the
rule of thumb OpenAI documents for English text; input tokens are never estimated (the
prompt of a call whose usage was lost is not known to have been billed).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from django.db.models import IntegerField, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

CHARS_PER_TOKEN = 4
TOKEN_KEYS = ("inputTokens", "outputTokens", "reasoningTokens", "cachedTokens")


def estimate_tokens(chars: int) -> int:
    """Return the output tokens estimated for ``chars`` characters of text: ``ceil(chars / 4)`` (0 for none)."""
    return math.ceil(max(chars, 0) / CHARS_PER_TOKEN)


def chars_of(parts: list[dict[str, Any]]) -> int:
    """Return the characters of the ``text`` and ``reasoning`` parts of a UIMessage's ``parts``."""
    return sum(len(p.get("text") or "") for p in parts if p.get("type") in ("text", "reasoning"))


@dataclasses.dataclass
class UsageMeter:
    """A run's usage as its model calls report it, plus the text no report covers (module docstring)."""

    reported: dict[str, int] = dataclasses.field(default_factory=dict)
    """Token counts summed over the reported model calls (``inputTokens``, ``outputTokens``, ...)."""
    estimated_tokens: int = 0
    """Output tokens estimated for text that was streamed and discarded unreported (a retried attempt)."""
    counted_chars: int = 0
    is_estimated: bool = False

    @classmethod
    def from_record(cls, record: dict[str, Any] | None, *, start_chars: int = 0) -> UsageMeter:
        """Return a meter going on from a stored ``Run.usage`` record (a run re-attached or restarted here).

        ``start_chars``: the characters the response message opens with (a Continue's partial
        answer, a Regenerate's kept steps), counted by earlier runs; used when the record is empty.
        """
        record = record or {"countedChars": start_chars}
        estimated = int(record.get("estimatedTokens", 0))
        reported = {key: int(record[key]) for key in TOKEN_KEYS if record.get(key)}
        if estimated:
            reported["outputTokens"] = reported.get("outputTokens", 0) - estimated
        reported = {key: count for key, count in reported.items() if count}
        return cls(reported, estimated, int(record.get("countedChars", 0)), is_estimated=bool(estimated))

    def add_reported(self, usage: dict[str, Any], message_chars: int) -> None:
        """Add one model call's reported ``usage``; ``message_chars``: the response message's characters now.

        A call that reported nothing leaves its text to the estimate.
        """
        if not usage:
            return
        for key, count in usage.items():
            self.reported[key] = self.reported.get(key, 0) + int(count)
        self.counted_chars = message_chars

    def add_unreported(self, chars: int) -> None:
        """Count ``chars`` characters streamed by an attempt that was discarded unreported (estimated)."""
        if chars > 0:
            self.estimated_tokens += estimate_tokens(chars)
            self.is_estimated = True

    def record(self, message_chars: int) -> dict[str, Any]:
        """Return the ``Run.usage`` record with the message at ``message_chars`` characters (the rest estimated)."""
        return usage_record(self.reported, self.estimated_tokens, self.counted_chars, message_chars, self.is_estimated)


def usage_record(
    reported: dict[str, int], estimated: int, counted_chars: int, message_chars: int, is_estimated: bool = False
) -> dict[str, Any]:
    """Return the ``Run.usage`` record: ``reported`` plus ``estimated`` tokens plus the text past ``counted_chars``."""
    extra = estimate_tokens(message_chars - counted_chars)
    estimated += extra
    record: dict[str, Any] = {key: int(reported.get(key, 0)) for key in TOKEN_KEYS}
    record["outputTokens"] += estimated
    if not reported and not estimated:
        return {}
    if not reported:
        source = "estimated"
    else:
        source = "partly_estimated" if (estimated or is_estimated) else "reported"
    covered = max(counted_chars, message_chars, 0)
    return {**record, "source": source, "estimatedTokens": estimated, "countedChars": covered}


def finish_stored(
    record: dict[str, Any] | None, message_chars: int, call_usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return a stored ``Run.usage`` record completed for a run ended without its process (the relaunch scan).

    ``call_usage``: what the provider reported for the model call past the record (a durable
    operation read after the process died in it); without it, the text past ``countedChars``
    is estimated.
    """
    meter = UsageMeter.from_record(record)
    meter.add_reported(call_usage or {}, message_chars)
    return meter.record(message_chars)


def token_sum(key: str) -> Any:
    """Return the aggregate summing ``Run.usage[key]`` over rows (0 for none): ``Sum(Cast(usage->>key))``."""
    return Coalesce(Sum(Cast(KeyTextTransform(key, "usage"), IntegerField())), 0)
