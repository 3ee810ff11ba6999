"""Run: the generation record of one attempt at one turn (000, "Model the generation as durable state")."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RunStatus(models.TextChoices):
    """Every state a run can be in (DESIGN, "Models")."""

    STARTING = "starting", _("starting")
    STREAMING = "streaming", _("streaming")
    TOOLING = "tooling", _("running tools")
    SUSPENDED_CLIENT_TOOL = "suspended_client_tool", _("waiting for the browser")
    INTERRUPTED = "interrupted", _("interrupted")
    RECOVERING = "recovering", _("recovering")
    COMPLETED = "completed", _("completed")
    CANCELLED = "cancelled", _("cancelled")
    FAILED = "failed", _("failed")
    SUPERSEDED = "superseded", _("superseded")


#: Statuses in which a run is live: it may still write to its stream (002, "Snapshot status").
LIVE_STATUSES = frozenset(
    {RunStatus.STARTING, RunStatus.STREAMING, RunStatus.TOOLING, RunStatus.SUSPENDED_CLIENT_TOOL, RunStatus.RECOVERING}
)
#: Statuses a run never leaves on its own.
TERMINAL_STATUSES = frozenset(
    {RunStatus.INTERRUPTED, RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.SUPERSEDED}
)
#: Statuses the relaunch scan inspects when the lease has expired (000, "Recovery on app relaunch").
SCANNED_STATUSES = frozenset({RunStatus.STARTING, RunStatus.STREAMING, RunStatus.TOOLING, RunStatus.RECOVERING})


#: Statuses of a run that needs a person until its resolution is recorded (000, "Recovery actions").
RESOLVABLE_STATUSES = frozenset({RunStatus.INTERRUPTED, RunStatus.FAILED})
#: The ``recovery_action`` of a run a newer run superseded while it was live.
SUPERSEDED_RESOLUTION = "superseded"
#: The ``recovery_action`` of an interrupted or failed run the user moved on from with a new message.
FOLLOW_UP_RESOLUTION = "follow_up"
#: The ``recovery_action`` of a live run a follow-up message stopped (``interrupt``: docs/runtime.md, "Multitask").
INTERRUPTED_RESOLUTION = "interrupted_by_follow_up"
#: The resolution recorded when a run of each kind follows an interrupted or failed run (others: follow-up).
RESOLUTION_OF_KIND = {"regenerate": "regenerate", "continue": "continue"}
#: Every ``recovery_action`` that resolves a run: it no longer needs a person. Check status and Mark
#: interrupted are recorded too, but leave the decision about the partial answer open.
RESOLUTIONS = frozenset(
    {
        "regenerate",
        "continue",
        "keep_partial",
        "discard_partial",
        SUPERSEDED_RESOLUTION,
        FOLLOW_UP_RESOLUTION,
        INTERRUPTED_RESOLUTION,
    }
)


class CancelledBy(models.TextChoices):
    """Who stopped a cancelled run (the user's chat says who, never a false "you")."""

    USER = "user", _("the user")
    STAFF = "staff", _("support staff")
    SYSTEM = "system", _("the system")
    FOLLOW_UP = "follow_up", _("a follow-up message")


class Run(models.Model):
    """One generation: an ``attempt`` (1-based) at the ``turn`` (the user message it answers).

    ``start_message_count`` is the committed message count at the run-start commit; the
    response message id is ``response_message_id``. ``start_sequence`` is the stream head
    when the run started: the run's chunks have sequences above it. The lease
    (``lease_owner``, ``lease_expires_at``) is held by the process executing the run.
    ``error_*`` hold the scrubbed classification of a failure (never free text).
    """

    id = models.CharField(primary_key=True, max_length=64)
    session = models.ForeignKey("helix_django.ChatSession", on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=32, choices=RunStatus, default=RunStatus.STARTING)
    kind = models.CharField(max_length=16, default="send")
    turn_message_id = models.CharField(max_length=128, blank=True, default="")
    attempt = models.PositiveIntegerField(default=1)
    agent = models.CharField(max_length=100, default="default")
    provider = models.CharField(max_length=100, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    provider_operation_id = models.CharField(max_length=200, blank=True, default="", db_index=True)
    continuation = models.JSONField(default=dict, blank=True)
    is_continuation_valid = models.BooleanField(default=True)
    request_key = models.CharField(max_length=128, null=True, blank=True)
    input_hash = models.CharField(max_length=64, blank=True, default="")
    start_message_count = models.PositiveIntegerField(default=0)
    start_sequence = models.BigIntegerField(default=0)
    response_message_id = models.CharField(max_length=128)
    step_count = models.PositiveIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)
    """Tokens the run's model calls cost (:mod:`helix_django.runtime.usage`): ``{inputTokens, outputTokens,
    reasoningTokens, cachedTokens, source, countedChars}``; ``{}`` before its first commit."""
    lease_owner = models.CharField(max_length=128, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    provider_cancel_result = models.CharField(max_length=64, blank=True, default="")
    provider_cancel_checks = models.PositiveSmallIntegerField(default=0)
    """How often the provider was asked again about a cancel whose answer was unclear."""
    provider_cancel_checked_at = models.DateTimeField(null=True, blank=True)
    """When the provider was last asked again about the cancel (None: never)."""
    cancelled_by = models.CharField(max_length=16, choices=CancelledBy, blank=True, default="")
    """Who asked to cancel (:class:`CancelledBy`; '' while no cancel was asked)."""
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_category = models.CharField(max_length=32, blank=True, default="")
    error_retryable = models.BooleanField(default=False)
    error_message = models.CharField(max_length=200, blank=True, default="")
    error_cause = models.CharField(max_length=40, blank=True, default="")
    """Why the run ended interrupted or failed, as a code: ``process_lost``, ``server_stopped``, ``provider_failed``."""
    interrupted_stage = models.CharField(max_length=32, blank=True, default="")
    partial_chars = models.PositiveIntegerField(default=0)
    recovery_action = models.CharField(max_length=32, blank=True, default="")
    """How an interrupted or failed run was resolved (:data:`RESOLUTIONS`); '' while it needs a person."""
    resolved_by = models.CharField(max_length=64, blank=True, default="", db_index=True)
    """The id of the run that followed and resolved this one ('' when none did: Keep, Discard)."""
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("generation")
        verbose_name_plural = _("generations")
        ordering = ("-created_at",)
        permissions = [("reconcile_run", "Can reconcile interrupted generations")]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_key"],
                condition=models.Q(request_key__isnull=False),
                name="helix_run_request_key_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="helix_run_status_lease_idx"),
            models.Index(fields=["session", "-created_at"], name="helix_run_session_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def is_live(self) -> bool:
        """Whether the run may still write to its stream."""
        return self.status in LIVE_STATUSES

    @property
    def is_terminal(self) -> bool:
        """Whether the run has ended for good."""
        return self.status in TERMINAL_STATUSES

    def error_detail(self) -> dict[str, object] | None:
        """Return the scrubbed ``errorDetail`` ``{code, category, retryable, message}`` or None."""
        if not self.error_code:
            return None
        return {
            "code": self.error_code,
            "category": self.error_category,
            "retryable": self.error_retryable,
            "message": self.error_message,
        }
