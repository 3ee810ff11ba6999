"""ChatSession: one conversation, its owner, its custom state and its current run."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from helix_django.conf import helix_settings


def default_agent() -> str:
    """Return the agent of a new session: ``HELIX["DEFAULT_AGENT"]`` as set now (README, settings)."""
    return str(helix_settings.DEFAULT_AGENT)


class ChatSession(models.Model):
    """A chat session (named to avoid clashing with ``django.contrib.sessions``).

    ``id`` is the public id; AI SDK clients mint it (002: the chat id), so it is a
    validated string (see :func:`helix_django.ids.validate_session_id`). A session belongs
    to ``owner`` or, for anonymous chat, to ``anonymous_key``: the owner token helix keeps
    in the visitor's Django session (:mod:`helix_django.access.ownership`).
    ``stream_id`` names the session's one stream, shared by all its turns (DESIGN).
    """

    id = models.CharField(primary_key=True, max_length=128)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="helix_sessions"
    )
    anonymous_key = models.CharField(max_length=64, blank=True, default="", db_index=True)
    agent = models.CharField(max_length=100, default=default_agent)
    title = models.CharField(max_length=200, blank=True, default="")
    state = models.JSONField(default=dict, blank=True)
    current_run = models.ForeignKey(
        "helix_django.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("chat session")
        verbose_name_plural = _("chat sessions")
        ordering = ("-updated_at",)
        indexes = [models.Index(fields=["owner", "-updated_at"], name="helix_session_owner_idx")]

    def __str__(self) -> str:
        return Truncator(self.title).chars(40) if self.title else self.id

    @property
    def stream_id(self) -> str:
        """Return the id of the session's stream in the stream manager (the session id)."""
        return self.id
