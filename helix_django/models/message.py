"""Message: a committed row of a session's conversation, as an AI SDK UIMessage."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _


class Message(models.Model):
    """A committed message at ``position`` in ``[0, n)`` of its session.

    ``parts`` are AI SDK UIMessage parts (``[{"type": "text", "text": ...}, ...]``).
    ``checkpoint_id`` is the checkpoint that wrote this version of the row; a snapshot
    uses it to prove the row is not newer than the checkpoint it anchors on.
    A row removed from the conversation by a rewind keeps its content with
    ``position=None`` and ``archived_at`` set, so earlier attempts stay auditable.
    """

    session = models.ForeignKey("helix_django.ChatSession", on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField(null=True, blank=True)
    ui_id = models.CharField(max_length=128)
    role = models.CharField(max_length=16)
    parts = models.JSONField(default=list)
    metadata = models.JSONField(default=dict, blank=True)
    run = models.ForeignKey(
        "helix_django.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    checkpoint_id = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ("session", "position")
        constraints = [
            models.UniqueConstraint(
                fields=["session", "position"],
                condition=models.Q(position__isnull=False),
                name="helix_message_position_unique",
            ),
        ]
        indexes = [models.Index(fields=["session", "ui_id"], name="helix_message_ui_id_idx")]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"

    def to_ui_message(self) -> dict[str, Any]:
        """Return the AI SDK UIMessage ``{id, role, parts, metadata}`` of this row."""
        return {"id": self.ui_id, "role": self.role, "parts": self.parts, "metadata": self.metadata}

    @property
    def text(self) -> str:
        """Return the concatenated text parts (for display and search only)."""
        return "".join(p.get("text", "") for p in self.parts if isinstance(p, dict) and p.get("type") == "text")
