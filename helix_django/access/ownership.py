"""Who owns a session, and the owner-scoped lookups every route uses.

A session belongs to a user or, where ``HELIX["ALLOW_ANONYMOUS"]`` is on, to an anonymous
visitor: a random owner token helix keeps inside the visitor's Django session
(``OWNER_TOKEN_KEY``), created on the visitor's first send. The token, not the session key,
is stored as ``ChatSession.anonymous_key``, so it survives a new session key
(``cycle_key()``, as ``login()`` calls it), a signed-cookie session signed again, and two
signed-cookie visitors whose cookies are byte-identical. Every route answers another
owner's session exactly like an unknown one: ``SessionNotFoundError`` (404), never 403.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any

from django.contrib.sessions.backends.signed_cookies import SessionStore as SignedCookieSession
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy
from rest_framework.authentication import CSRFCheck

from helix_django.conf import helix_settings
from helix_django.errors import NotAuthenticatedError, PermissionDeniedError, SessionNotFoundError
from helix_django.ids import is_valid_session_id
from helix_django.models import ChatSession

OWNER_TOKEN_KEY = "_helix_owner"  # noqa: S105 - a session key name, not a secret
"""The Django session key under which helix keeps an anonymous visitor's owner token."""


@dataclasses.dataclass(frozen=True)
class Owner:
    """The identity a request acts for: a user id, or an anonymous visitor's owner token."""

    user_id: int | None = None
    """Primary key of the authenticated user (None for anonymous)."""
    anonymous_key: str = ""
    """Owner token of an anonymous visitor ('' for a user, or for a visitor who has none yet)."""
    legacy_key: str = ""
    """Django session key of an anonymous visitor whose sessions may predate owner tokens ('' if none)."""

    @property
    def is_anonymous(self) -> bool:
        """Whether the owner is an anonymous visitor."""
        return self.user_id is None

    def keys(self) -> frozenset[str]:
        """The non-empty ``anonymous_key`` values this anonymous owner owns (empty for a user)."""
        if self.user_id is not None:
            return frozenset()
        return frozenset(key for key in (self.anonymous_key, self.legacy_key) if key)

    def q(self) -> Q:
        """Return the ChatSession filter selecting this owner's sessions (none for an owner without a key)."""
        if self.user_id is not None:
            return Q(owner_id=self.user_id)
        return Q(owner__isnull=True, anonymous_key__in=sorted(self.keys())) & ~Q(anonymous_key="")

    def owns(self, session: ChatSession) -> bool:
        """Whether ``session`` belongs to this owner."""
        if self.user_id is not None:
            return session.owner_id == self.user_id
        return session.owner_id is None and bool(session.anonymous_key) and session.anonymous_key in self.keys()


def is_signed_in(user: Any) -> bool:
    """Whether ``user`` is signed in (DRF's ``request.user`` is None under ``UNAUTHENTICATED_USER: None``)."""
    return user is not None and bool(getattr(user, "is_authenticated", False))


def owner_for(user: Any, django_session: Any, *, create_anonymous: bool = False) -> Owner:
    """Return the Owner of a request from its user and Django session.

    An authenticated user owns by user id. Otherwise, with ``ALLOW_ANONYMOUS``, the owner
    token in the Django session (``OWNER_TOKEN_KEY``) owns; ``create_anonymous`` puts a new
    random token there when there is none yet and saves the session (the caller must send
    its cookie). Sessions created when the Django session key owned stay reachable through
    ``Owner.legacy_key`` on every engine but ``signed_cookies`` (whose key is the cookie's
    content, shared by identical cookies). Reads the session's data: call it in the ORM's
    thread unless the session is loaded already (Channels' ``AuthMiddleware`` loads it).
    Raises NotAuthenticatedError for a visitor with neither.
    """
    if is_signed_in(user):
        return Owner(user_id=user.pk)
    if not helix_settings.ALLOW_ANONYMOUS or django_session is None:
        raise NotAuthenticatedError()
    token = django_session.get(OWNER_TOKEN_KEY) or ""
    if not token and create_anonymous:
        token = secrets.token_urlsafe(32)
        django_session[OWNER_TOKEN_KEY] = token
        django_session.save()
    legacy = "" if isinstance(django_session, SignedCookieSession) else django_session.session_key or ""
    if not token and not legacy:
        raise NotAuthenticatedError()
    return Owner(anonymous_key=token, legacy_key=legacy)


def owned_sessions(owner: Owner) -> QuerySet[ChatSession]:
    """Return the sessions of ``owner``, newest first."""
    return ChatSession.objects.filter(owner.q())


def get_owned_session(session_id: str, owner: Owner) -> ChatSession:
    """Return the session if ``owner`` owns it; raise SessionNotFoundError (404) otherwise.

    An id that is not a valid session id (``ids.validate_session_id``) cannot exist: it is
    a 404 without a query (PostgreSQL refuses NUL characters in a query parameter).
    """
    if not is_valid_session_id(session_id):
        raise SessionNotFoundError()
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is None or not owner.owns(session):
        raise SessionNotFoundError()
    return session


UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _no_response(request: Any) -> None:
    return None


def enforce_anonymous_csrf(request: Any) -> None:
    """Enforce Django's CSRF check on an unsafe request identified only by its session cookie.

    DRF's SessionAuthentication checks CSRF for logged-in users; an anonymous owner is
    also a cookie identity, so it gets the same check. Raises PermissionDeniedError
    (``cause: csrf``).
    """
    if request.method not in UNSAFE_METHODS or not request.session.session_key:
        return
    check = CSRFCheck(_no_response)
    check.process_request(request)
    if check.process_view(request, None, (), {}):
        raise PermissionDeniedError(gettext_lazy("CSRF check failed"), cause="csrf")
