"""The chat page: the signed-in user's sessions, one conversation, the composer."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from helix_django.models import ChatSession

_PLACEHOLDER = "__session__"


def helix_api_base() -> str:
    """Return where the URLconf mounts ``helix_django.urls`` (``/helix/api`` here), for the page's client.

    Read from the URLconf, so a copy of this view follows the prefix the site chose.
    """
    sessions = reverse("helix_django:session-list")  # "<prefix>sessions/"
    return sessions[: -len("sessions/")].rstrip("/")


def _new_session_id() -> str:
    return f"s_{uuid.uuid4().hex}"


@login_required
def index(request: HttpRequest) -> HttpResponse:
    """Open the user's most recent session, or a new one."""
    latest = ChatSession.objects.filter(owner=request.user).order_by("-updated_at").values_list("id", flat=True).first()
    return HttpResponseRedirect(reverse("chat:session", args=[latest or _new_session_id()]))


@login_required
def session(request: HttpRequest, session_id: str) -> HttpResponse:
    """Render the chat page for ``session_id`` (a new id is created by its first send).

    ``new_session`` tells the page that the user has no session with this id yet, so it
    opens an empty chat without requesting the snapshot (which would answer 404).
    """
    context = {
        "session_id": session_id,
        "new_session": not ChatSession.objects.filter(pk=session_id, owner=request.user).exists(),
        "helix_api_base": helix_api_base(),
        "chat_url_template": reverse("chat:session", args=[_PLACEHOLDER]),
        "logout_url": reverse("logout"),
    }
    return render(request, "helix_django/chat.html", context)
