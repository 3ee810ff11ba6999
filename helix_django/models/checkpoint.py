"""Checkpoint: the durable state of a session at one stream sequence."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class CheckpointKind(models.TextChoices):
    """Why a checkpoint was written (DESIGN, "Models")."""

    RUN_START = "run_start", _("run start")
    STEP = "step", _("step")
    TERMINAL = "terminal", _("terminal")
    TRUNCATE = "truncate", _("truncate")


class Checkpoint(models.Model):
    """Rows ``[0, message_count)`` and ``state`` of a session as of ``stream_sequence``.

    Written in the same transaction as the message rows it counts, so they always agree
    (002, "Snapshots"). Ids increase with time; the latest checkpoint of a session is the
    one with the highest id.
    """

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey("helix_django.ChatSession", on_delete=models.CASCADE, related_name="checkpoints")
    run = models.ForeignKey(
        "helix_django.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints"
    )
    kind = models.CharField(max_length=16, choices=CheckpointKind)
    message_count = models.PositiveIntegerField()
    stream_sequence = models.BigIntegerField()
    step_count = models.PositiveIntegerField(default=0)
    state = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("checkpoint")
        verbose_name_plural = _("checkpoints")
        ordering = ("-id",)
        indexes = [models.Index(fields=["session", "-id"], name="helix_checkpoint_latest_idx")]

    def __str__(self) -> str:
        return f"{self.kind} @{self.stream_sequence}"
