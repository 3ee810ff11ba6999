"""Serializers of the DRF endpoints (field names in camelCase, as the snapshot's; timestamps ISO 8601 in UTC)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy
from rest_framework import serializers

from helix_django.ids import validate_session_id
from helix_django.limits import check_tool_result_size
from helix_django.models import ChatSession, Run


class StrictCharField(serializers.CharField):
    """A CharField that refuses a value that is not a string (DRF's turns ``0`` into ``"0"``)."""

    def to_internal_value(self, data: Any) -> str:
        """Return the string; raise ValidationError (``invalid``) for a number, boolean, list or object."""
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class UTCDateTimeField(serializers.DateTimeField):
    """A read-only timestamp as ISO 8601 in UTC (``2026-12-04T14:47:05.123456Z``), or None.

    Whatever the host's DRF ``DATETIME_FORMAT``, ``USE_TZ`` and ``TIME_ZONE``: a naive value
    (stored under ``USE_TZ = False``) is the site's ``TIME_ZONE`` time, as Django wrote it.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: dt.datetime | None) -> str | None:
        """Return ``value`` in UTC as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``; None for None."""
        if value is None:
            return None
        if timezone.is_naive(value):
            value = timezone.make_aware(value, timezone.get_default_timezone())
        return value.astimezone(dt.UTC).isoformat().removesuffix("+00:00") + "Z"


class SessionSerializer(serializers.ModelSerializer):
    """A session as listed and retrieved: ``{id, title, agent, currentRunId, createdAt, updatedAt}``."""

    currentRunId = serializers.CharField(source="current_run_id", read_only=True, allow_null=True)  # noqa: N815
    createdAt = UTCDateTimeField(source="created_at")  # noqa: N815
    updatedAt = UTCDateTimeField(source="updated_at")  # noqa: N815

    class Meta:
        model = ChatSession
        fields = ("id", "title", "agent", "currentRunId", "createdAt", "updatedAt")
        read_only_fields = ("agent",)


class SessionCreateSerializer(serializers.Serializer):
    """Body of ``POST sessions/``: an optional client-minted ``id`` and a ``title``."""

    id = StrictCharField(required=False, max_length=128)
    title = StrictCharField(required=False, max_length=200, allow_blank=True, default="")

    def validate_id(self, value: str) -> str:
        """Accept 1-128 of ``[A-Za-z0-9_-]`` (never echoing the value)."""
        try:
            return validate_session_id(value)
        except Exception as exc:
            raise serializers.ValidationError("invalid") from exc


class RunSerializer(serializers.ModelSerializer):
    """A run: status, kind, attempt, timings and its scrubbed error."""

    responseMessageId = serializers.CharField(source="response_message_id", read_only=True)  # noqa: N815
    createdAt = UTCDateTimeField(source="created_at")  # noqa: N815
    startedAt = UTCDateTimeField(source="started_at", allow_null=True)  # noqa: N815
    finishedAt = UTCDateTimeField(source="finished_at", allow_null=True)  # noqa: N815
    error = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = (
            "id",
            "status",
            "kind",
            "attempt",
            "responseMessageId",
            "createdAt",
            "startedAt",
            "finishedAt",
            "error",
        )

    def get_error(self, run: Run) -> dict[str, Any] | None:
        """Return ``{code, category, retryable}`` of a failed run, else None."""
        detail = run.error_detail()
        return {k: detail[k] for k in ("code", "category", "retryable")} if detail else None


class ToolResultSerializer(serializers.Serializer):
    """One client-tool result or approval answer.

    ``{toolCallId, output}`` (a result), ``{toolCallId, errorText}`` (a failed call) or
    ``{toolCallId, approved, reason?}`` (an approval answer; ``approvalId`` optional).
    """

    toolCallId = StrictCharField(max_length=200)  # noqa: N815
    output = serializers.JSONField(required=False)
    errorText = StrictCharField(required=False, max_length=10_000, allow_blank=True)  # noqa: N815
    approved = serializers.BooleanField(required=False)
    approvalId = StrictCharField(required=False, max_length=300)  # noqa: N815
    reason = StrictCharField(required=False, max_length=2_000, allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Require exactly one of ``output``, ``errorText`` or ``approved``; bound ``output``'s size.

        Raises PayloadTooLargeError (413, ``cause: "tool_result"``, ``limitBytes``,
        ``sizeBytes``) for an output over ``MAX_TOOL_RESULT_BYTES`` (helix_django/limits.py).
        """
        given = [key for key in ("output", "errorText", "approved") if key in attrs]
        if len(given) != 1:
            raise serializers.ValidationError("exactly one of output, errorText or approved")
        if "output" in attrs:
            check_tool_result_size(attrs["output"], gettext_lazy("Tool result too large"))
        return attrs


class ToolResultsSerializer(serializers.Serializer):
    """Body of ``POST .../runs/<run_id>/tool-results``: ``{results: [ToolResult]}`` (1-100)."""

    results = ToolResultSerializer(many=True, allow_empty=False, max_length=100)


class SnapshotSerializer(serializers.Serializer):
    """The FrontendSnapshot (002, "Snapshots"), for the schema: the committed conversation at one checkpoint.

    ``messages`` are AI SDK UIMessages; ``streamSequence`` is the cursor to resume from;
    ``errorDetail`` is present when ``status`` is ``failed``.
    """

    sessionId = serializers.CharField()  # noqa: N815 - wire name
    messages = serializers.ListField(child=serializers.DictField(), help_text="AI SDK UIMessages, in order.")
    streamSequence = serializers.IntegerField(min_value=0)  # noqa: N815
    state = serializers.DictField()
    status = serializers.ChoiceField(choices=["active", "paused", "ended", "failed"])
    resumeMessageId = serializers.CharField(required=False)  # noqa: N815
    latestTruncateCheckpointId = serializers.IntegerField(allow_null=True)  # noqa: N815
    errorDetail = serializers.DictField(required=False)  # noqa: N815
    checkpointId = serializers.IntegerField(allow_null=True)  # noqa: N815
    stepCount = serializers.IntegerField(min_value=0)  # noqa: N815
    runId = serializers.CharField(allow_null=True)  # noqa: N815
    runStatus = serializers.CharField(allow_null=True)  # noqa: N815
