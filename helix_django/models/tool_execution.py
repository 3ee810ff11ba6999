"""ToolExecution: the durable record of one tool call (000, "Persist tool execution before model continuation")."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class ToolEffect(models.TextChoices):
    """How dangerous it is to run a tool again (000, "Recovery policy should classify tool effects")."""

    READ_ONLY = "read_only", _("read only")
    IDEMPOTENT = "idempotent", _("idempotent")
    SIDE_EFFECT = "side_effect", _("side effect")


class ToolExecutionStatus(models.TextChoices):
    """Lifecycle of a tool call; ``unknown`` means it started and its outcome was never recorded."""

    AWAITING_APPROVAL = "awaiting_approval", _("awaiting approval")
    APPROVED = "approved", _("approved")
    DENIED = "denied", _("denied")
    AWAITING_CLIENT = "awaiting_client", _("awaiting the browser")
    STARTED = "started", _("started")
    SUCCEEDED = "succeeded", _("succeeded")
    FAILED = "failed", _("failed")
    UNKNOWN = "unknown", _("unknown")


class ToolExecution(models.Model):
    """One call of a tool within a run, keyed by the provider's ``tool_call_id``.

    ``idempotency_key`` is the side effect's own identity, distinct from the provider's
    correlation id (000, "Tool call IDs are useful but not sufficient").
    """

    run = models.ForeignKey("helix_django.Run", on_delete=models.CASCADE, related_name="tool_executions")
    tool_call_id = models.CharField(max_length=128)
    name = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict, blank=True)
    effect = models.CharField(max_length=16, choices=ToolEffect, default=ToolEffect.SIDE_EFFECT)
    is_client_tool = models.BooleanField(default=False)
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=32, choices=ToolExecutionStatus)
    result = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True, default="")
    step = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("tool execution")
        verbose_name_plural = _("tool executions")
        ordering = ("run", "id")
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="helix_tool_call_unique"),
        ]
        indexes = [models.Index(fields=["idempotency_key"], name="helix_tool_idem_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def approval_id(self) -> str:
        """Return the approval id ``${runId}::${toolCallId}`` (002, "Replayed tools and approvals")."""
        return f"{self.run_id}::{self.tool_call_id}"
