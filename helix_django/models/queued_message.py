"""QueuedMessage: a follow-up typed while an answer was being written, stored to start after it."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class QueuedMessageStatus(models.TextChoices):
    """Where a queued message is: waiting, started as a run, removed by its owner, or refused at its start."""

    QUEUED = "queued", _("queued")
    STARTED = "started", _("started")
    REMOVED = "removed", _("removed")
    REFUSED = "refused", _("refused")


class QueuedMessage(models.Model):
    """A user message a send stored under multitask ``enqueue`` while a run of its session was live.

    It is not part of the conversation until it starts: then it is sent as if typed at that
    moment (the run that ended is in its context) and ``run`` is the run it started.
    ``message`` is the UI message as sent (``{id, role: "user", parts}``);
    ``request_key`` is the send's own key, or one minted from ``id`` (a start repeated by
    two processes attaches to one run: 002, "Retried sends and request keys").
    ``error_code``: the typed refusal of a start that could not happen (``refused``).
    """

    id = models.CharField(primary_key=True, max_length=64)
    session = models.ForeignKey("helix_django.ChatSession", on_delete=models.CASCADE, related_name="queued_messages")
    message = models.JSONField()
    message_id = models.CharField(max_length=128)
    request_key = models.CharField(max_length=128)
    input_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=QueuedMessageStatus.choices, default=QueuedMessageStatus.QUEUED)
    run = models.ForeignKey("helix_django.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error_code = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("queued message")
        verbose_name_plural = _("queued messages")
        ordering = ("created_at", "id")
        constraints = [
            models.UniqueConstraint(fields=["session", "request_key"], name="helix_queued_request_key_unique"),
        ]
        indexes = [models.Index(fields=["session", "status", "created_at"], name="helix_queued_session_idx")]

    def __str__(self) -> str:
        return self.id

    def ui_message(self) -> dict:
        """Return the message as the snapshot lists it: ``{id, queuedMessageId, role, parts, createdAt}``."""
        return {
            **self.message,
            "queuedMessageId": self.id,
            "createdAt": self.created_at.isoformat(),
        }
