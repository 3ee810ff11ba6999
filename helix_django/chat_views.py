"""The chat page a site mounts in one line: ``path("chat/", include("helix_django.chat_urls"))``.

The page (``helix_django/chat.html`` and its JS) lists the visitor's conversations, shows
one and sends through helix's API, so the site must also include ``helix_django.urls``
(README, "Install into an existing project"). It needs nothing else of the site: no URL
name, no template. Who may open it:

- a signed-in user (Django's ``AuthenticationMiddleware``);
- with ``HELIX["ALLOW_ANONYMOUS"]``, any visitor, owning their chats through the owner
  token in their Django session (:mod:`helix_django.access.ownership`);
- anyone else is sent to sign in: to ``settings.LOGIN_URL`` where the site set it, else to
  this page's own sign-in page (``login/``, Django's ``LoginView`` with helix's template),
  so a new project whose default ``/accounts/login/`` does not exist still works (under
  Django's ``LoginRequiredMiddleware`` too: the views decide this themselves). The page's
  Log out button posts to its own ``logout/``.

URL names live in the ``helix_chat`` namespace: ``index``, ``session``, ``login``, ``logout``.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView, LogoutView, redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import NoReverseMatch, reverse

from helix_django.access.ownership import Owner, is_signed_in, owned_sessions, owner_for
from helix_django.conf import helix_settings
from helix_django.errors import NotAuthenticatedError

NAMESPACE = "helix_chat"
"""The application namespace of :mod:`helix_django.chat_urls`."""

_PLACEHOLDER = "__session__"


def _reverse(request: HttpRequest, name: str, *args: str) -> str:
    """Reverse one of this page's URL names under the namespace the request was routed through."""
    match = getattr(request, "resolver_match", None)
    return reverse(f"{NAMESPACE}:{name}", args=args, current_app=match.namespace if match else None)


def helix_api_base() -> str:
    """Return where the URLconf mounts ``helix_django.urls`` (e.g. ``/helix/api``), for the page's client."""
    sessions = reverse("helix_django:session-list")  # "<prefix>sessions/"
    return sessions[: -len("sessions/")].rstrip("/")


def login_url(request: HttpRequest) -> str:
    """Return where a visitor signs in: the site's ``LOGIN_URL`` if it set one, else this page's ``login/``."""
    if cast(Any, settings).is_overridden("LOGIN_URL"):  # LazySettings has it; the stubs do not
        return str(resolve_url(settings.LOGIN_URL))
    return _reverse(request, "login")


def page_owner(request: HttpRequest) -> Owner | None:
    """Return the visitor's Owner, or None for an anonymous visitor who owns no chat yet."""
    try:
        return owner_for(getattr(request, "user", None), getattr(request, "session", None))
    except NotAuthenticatedError:
        return None


def _may_chat(request: HttpRequest) -> bool:
    return is_signed_in(getattr(request, "user", None)) or bool(helix_settings.ALLOW_ANONYMOUS)


def _admin_url(request: HttpRequest) -> str:
    """The admin's index for staff where the site routes Django's admin, else ''."""
    if not getattr(getattr(request, "user", None), "is_staff", False):
        return ""
    try:
        return reverse("admin:index")
    except NoReverseMatch:
        return ""


@login_not_required  # under LoginRequiredMiddleware too: it decides itself (ALLOW_ANONYMOUS, its own sign-in)
def index(request: HttpRequest) -> HttpResponse:
    """Open the visitor's most recent chat, or a new one (302); sign-in first where needed."""
    if not _may_chat(request):
        return redirect_to_login(request.get_full_path(), login_url(request))
    owner = page_owner(request)
    latest = None
    if owner is not None:
        latest = owned_sessions(owner).order_by("-updated_at").values_list("id", flat=True).first()
    return HttpResponseRedirect(_reverse(request, "session", latest or f"s_{uuid.uuid4().hex}"))


@login_not_required
def session(request: HttpRequest, session_id: str) -> HttpResponse:
    """Render the chat page for ``session_id`` (a new id is created by its first send).

    ``new_session`` tells the page that the visitor has no chat with this id yet, so it
    opens an empty chat without requesting the snapshot (which would answer 404).
    """
    if not _may_chat(request):
        return redirect_to_login(request.get_full_path(), login_url(request))
    owner = page_owner(request)
    signed_in = is_signed_in(getattr(request, "user", None))
    context: dict[str, Any] = {
        "session_id": session_id,
        "new_session": owner is None or not owned_sessions(owner).filter(pk=session_id).exists(),
        "helix_api_base": helix_api_base(),
        "chat_url_template": _reverse(request, "session", _PLACEHOLDER),
        "logout_url": _reverse(request, "logout") if signed_in else "",
        "admin_url": _admin_url(request),
    }
    return render(request, "helix_django/chat.html", context)


class ChatLoginView(LoginView):
    """Django's sign-in form in helix's look; back to the chat page afterwards (or to ``next``)."""

    template_name = "helix_django/login.html"

    def get_default_redirect_url(self) -> str:
        """The chat page, whatever the site's ``LOGIN_REDIRECT_URL``."""
        return _reverse(self.request, "index")


class ChatLogoutView(LogoutView):
    """Django's log-out (POST); back to the chat page, which asks to sign in again."""

    def get_default_redirect_url(self) -> str:
        """The chat page, whatever the site's ``LOGOUT_REDIRECT_URL``."""
        return _reverse(self.request, "index")
