"""Stream and StreamChunk: storage of the database stream manager."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class StreamStatus(models.TextChoices):
    """The stream's own status, never a run's liveness (002, "Stream status")."""

    ACTIVE = "active", _("active")
    PAUSED = "paused", _("paused")
    ENDED = "ended", _("ended")
    FAILED = "failed", _("failed")


class Stream(models.Model):
    """Head, status and claiming run of one stream (database stream manager only).

    ``head_sequence`` is the highest sequence ever assigned; it is never rewound.
    """

    stream_id = models.CharField(primary_key=True, max_length=128)
    status = models.CharField(max_length=16, choices=StreamStatus, default=StreamStatus.ACTIVE)
    run_id = models.CharField(max_length=64, blank=True, default="")
    head_sequence = models.BigIntegerField(default=0)
    claim_epoch = models.BigIntegerField(default=0)
    end_status = models.CharField(max_length=32, blank=True, default="")
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("stream")
        verbose_name_plural = _("streams")

    def __str__(self) -> str:
        return f"{self.stream_id} ({self.status} @{self.head_sequence})"


class StreamChunk(models.Model):
    """One stored chunk: ``payload`` is the chunk dict; ``sequence`` is unique per stream."""

    id = models.BigAutoField(primary_key=True)
    stream_id = models.CharField(max_length=128)
    sequence = models.BigIntegerField()
    run_id = models.CharField(max_length=64, blank=True, default="")
    attempt_id = models.CharField(max_length=64, blank=True, default="")
    step = models.PositiveIntegerField(default=0)
    type = models.CharField(max_length=48)
    payload = models.JSONField()

    class Meta:
        verbose_name = _("stream chunk")
        verbose_name_plural = _("stream chunks")
        ordering = ("stream_id", "sequence")
        constraints = [
            models.UniqueConstraint(fields=["stream_id", "sequence"], name="helix_chunk_sequence_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id}#{self.sequence} {self.type}"
