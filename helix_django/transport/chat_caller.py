"""Who sends a chat request, and what the route's one thread hop reads for it (in the ORM's thread).

:func:`identify` authenticates the caller with helix's policy, then reads the session a
send names and whether it already holds the trailing message (a resume by ``POST``, 002),
or, for a resume, what the resume is planned from
(:func:`~helix_django.transport.resume_reads.read_resume_state`): one trip for the caller,
its session, run and committed tool calls.
"""

from __future__ import annotations

import dataclasses

from django.http import HttpRequest

from helix_django.errors import SessionNotFoundError
from helix_django.models import ChatSession
from helix_django.store.reads import holds_active_message, read_session
from helix_django.transport.auth import Identity, authenticate
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.resume_reads import ResumeState, read_resume_state


@dataclasses.dataclass(frozen=True)
class Caller:
    """What one trip to the ORM's thread learns about a chat request's caller and session."""

    identity: Identity
    session: ChatSession | None = None
    """The session row a send names (None: none yet, or the request carries no message)."""
    holds_last_message: bool = False
    """The session already holds the body's trailing message: the request resumes, it sends nothing."""
    resume: ResumeState | None = None
    """What a resume is planned from (a GET, or a POST whose trailing message the session holds)."""


def may_hold_last_message(request: ChatRequest) -> bool:
    """Whether the trailing message may be one the session holds (a resume by POST, 002); else it is a send."""
    last = request.messages[-1]
    keyed_or_edit = request.trigger == "regenerate-message" or request.message_id or request.request_key
    return not keyed_or_edit and last["role"] != "assistant"


def identify(django_request: HttpRequest, request: ChatRequest | None, create_anonymous: bool) -> Caller:
    """Authenticate, then read the session row a send names (and whether it holds the trailing message).

    A resume (no message, or a trailing message the session holds) also reads here what it is
    planned from (:func:`~helix_django.transport.resume_reads.read_resume_state`): one trip to
    the ORM's thread for the caller, its session, run and committed tool calls.
    """
    identity = authenticate(django_request, create_anonymous=create_anonymous)
    if request is None:
        return Caller(identity)
    if not request.has_messages:  # a resume: its reads join this hop
        return Caller(identity, resume=read_resume_state(request.session_id, identity.owner))
    session = read_session(request.session_id)
    if session is None or not may_hold_last_message(request):
        return Caller(identity, session)
    if not holds_active_message(session.pk, request.messages[-1]["id"]):
        return Caller(identity, session)
    resume = read_resume_state(session.pk, identity.owner, session=session)
    return Caller(identity, session, holds_last_message=True, resume=resume)


def session_for_send(request: ChatRequest, caller: Caller) -> ChatSession:
    """Return the caller's session, or an unsaved one its send's run-start commit creates."""
    owner = caller.identity.owner
    if caller.session is None:
        return ChatSession(id=request.session_id, owner_id=owner.user_id, anonymous_key=owner.anonymous_key)
    if not owner.owns(caller.session):
        raise SessionNotFoundError()
    return caller.session
