"""The chat route: ``POST`` sends and ``GET`` resumes over the AI SDK UI message stream (002).

Mounted at ``<prefix>sessions/<session_id>/chat`` by :mod:`helix_django.transport.routing`.
A request whose trailing message is a new user message (or a tool-result continuation,
a regenerate, an edit, or any keyed send) calls ``executor.execute()`` and streams only
the new run's chunks, read after the handle's ``from_sequence`` (the run's start); anything
else is a resume (:mod:`helix_django.transport.resume`). Refusals are typed JSON
(``HelixError.to_body()``) with their status, every one through the host's middleware
(its headers) and in the request's language, a body refused unread included
(:func:`~helix_django.transport.host.refusal_through_host`); once streaming, a failure is one ``error``
chunk. A client that disconnects ends only its own response: ``execute()`` is shielded
and the run goes on.

One trip to the ORM's thread before the first byte: the body is read and
checked on the loop, then :func:`_admit` runs the host's middleware around the route's
view (authentication, the session read) and, for a plain send, the run-start commit with
the stream claim and the opening chunks right after it; the run opens back on the loop.
A send that needs more (a live run, a keyed repeat, an edit, a regenerate, a tool result)
goes through ``execute()``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from django.http import HttpRequest

from helix_django.conf import helix_settings
from helix_django.deadlines import completes_despite_cancel
from helix_django.errors import (
    MethodNotAllowedError,
    NotAuthenticatedError,
    ValidationError,
)
from helix_django.orm import sync_to_async
from helix_django.runtime.sends import StartedSend
from helix_django.transport.chat_caller import Caller, identify, session_for_send
from helix_django.transport.chat_request import ChatRequest, aparse_chat_request
from helix_django.transport.chat_send import (
    OpenedSend,
    get_executor,
    is_plain_chat_send,
    loop_head,
    plan_handle,
    plan_send,
)
from helix_django.transport.host import HostAnswer, refusal_through_host, send_host_response, through_host
from helix_django.transport.http import (
    ClientDisconnected,
    DisconnectWatch,
    StreamedResponse,
    read_body,
    run_until_disconnect,
)
from helix_django.transport.plan import ResponsePlan, plan_frames
from helix_django.transport.responses import log_unexpected, send_empty, send_error, send_json
from helix_django.transport.resume import plan_resume
from helix_django.transport.wire_ui import UI_STREAM_HEADERS


async def plan_chat(request: ChatRequest, caller: Caller, opened: OpenedSend | None = None) -> ResponsePlan:
    """Decide between a send and a resume and plan the response (before any header is sent).

    ``opened``: the send the route's thread hop already started (:func:`_admit`).
    """
    if opened is not None:
        return await plan_handle(request, opened.session, opened.handle)
    if request.has_messages:
        session = session_for_send(request, caller)
        if not caller.holds_last_message:
            return await plan_send(request, caller.identity, session)
    assert caller.resume is not None  # identify reads it for every resume
    return await plan_resume(request, caller.resume)


async def _parse(scope: dict[str, Any], body: bytes) -> tuple[ChatRequest | None, ValidationError | None]:
    """Return ``(request, None)`` or ``(None, the ValidationError)``; raised only after authentication.

    The body's schema check runs on the validation worker thread, never on the event loop
    nor on the ORM's thread (docs/limits.md).
    """
    try:
        return await aparse_chat_request(scope, scope["url_route"]["kwargs"]["session_id"], body), None
    except ValidationError as exc:
        return None, exc


def _identify_caller(
    scope: dict[str, Any], parsed: tuple[ChatRequest | None, ValidationError | None], django_request: HttpRequest
) -> tuple[ChatRequest, Caller]:
    """The route's view, run inside the host's middleware: method, authenticate, read.

    ``parsed`` is :func:`_parse`'s result; its refusal is raised only after authentication.
    """
    if scope["method"] not in ("GET", "POST"):
        raise MethodNotAllowedError(allowed=("GET", "POST"))
    request, invalid = parsed
    try:  # an invalid request never creates an anonymous visitor's Django session
        create_anonymous = scope["method"] == "POST" and not invalid
        caller = identify(django_request, request, create_anonymous)
    except NotAuthenticatedError:
        if invalid is not None and helix_settings.ALLOW_ANONYMOUS:
            raise invalid from None
        raise
    if invalid is not None:
        raise invalid
    assert request is not None  # _parse returns a request whenever it returns no error
    return request, caller


@dataclasses.dataclass
class _Admitted:
    """What the route's one thread hop decided (:func:`_admit`), then what opening its send gave."""

    request: ChatRequest
    caller: Caller
    started: StartedSend | None = None
    """A plain send whose run-start commit landed in the hop (None: plan_chat decides)."""
    opened: OpenedSend | None = None
    error: BaseException | None = None
    """The send's refusal, raised once the caller's cookies are on the response's headers."""


def _admit(
    scope: dict[str, Any],
    body: bytes,
    parsed: tuple[ChatRequest | None, ValidationError | None],
    stream_sequence: int | None,
) -> HostAnswer:
    """The route's one trip to the ORM's thread: the host's middleware around the view, then a send's start.

    The host's middleware runs once, around :func:`_identify_caller` only; a plain send's
    run-start commit (:func:`~helix_django.runtime.sends.start_send_in_thread`)
    follows it in the same trip, once the middleware let the request through (one thread
    hop before the first byte). ``stream_sequence``: the stream head read on
    the loop, if it was (:func:`_loop_head`).
    """
    answer = through_host(scope, body, functools.partial(_identify_caller, scope, parsed))
    if answer.response is not None or answer.error is not None:
        return answer
    request, caller = answer.value
    admitted = answer.value = _Admitted(request, caller)
    if caller.holds_last_message or not is_plain_chat_send(request):
        return answer
    try:
        session = session_for_send(request, caller)
        admitted.started = get_executor().start_send_in_thread(
            session, request.messages, request_key=request.request_key, stream_sequence=stream_sequence
        )
    except Exception as exc:  # typed by the executor; sent with the middleware's headers
        admitted.error = exc
    return answer


async def _admit_and_open(
    scope: dict[str, Any], body: bytes, parsed: tuple[ChatRequest | None, ValidationError | None]
) -> HostAnswer:
    """Run :func:`_admit` on the ORM's thread, then open the send it started where runs live."""
    head = await loop_head(parsed[0])
    answer = await sync_to_async(_admit)(scope, body, parsed, head)
    admitted = answer.value
    if answer.response is not None or answer.error is not None or admitted.started is None:
        return answer
    started = admitted.started
    try:
        # In the shielded task _plan runs this in for a plain send: the run opens even if the request is cancelled.
        handle = await get_executor().aopen_send(started, user=admitted.caller.identity.user, shielded=True)
    except Exception as exc:  # FrameworkInternalError (after_run_start): typed
        admitted.error = exc
    else:
        admitted.opened = OpenedSend(started.session, handle)
    admitted.started = None  # the response holds no commit result
    return answer


async def _read_and_admit(scope: dict[str, Any], receive: Any) -> HostAnswer:
    """Read and parse the body, then admit the request through the host's middleware (one thread hop).

    A body refused unread is still the view's result in the host's middleware. A plain
    send's admission is shielded: once the hop committed a run, it is opened even if this
    request is cancelled; anything else starts no run and gets no task of its own.
    """
    try:
        body = await read_body(scope, receive, max_bytes=helix_settings.MAX_REQUEST_BYTES)
    except ValidationError as exc:
        return await sync_to_async(refusal_through_host)(scope, exc)
    parsed = await _parse(scope, body)
    admitting = _admit_and_open(scope, body, parsed)
    if is_plain_chat_send(parsed[0]):
        return await completes_despite_cancel(admitting)
    return await admitting


async def _plan_watched(admitted: _Admitted, watch: DisconnectWatch) -> tuple[bool, Any]:
    """Plan the admitted request while ``watch`` watches the client; return ``(disconnected, plan or None)``.

    A resume's planning is cut short by a disconnect. A started send's plan is one read of
    what its run wrote so far: bounded, it needs no task to be cut short (a task and a loop
    round, during which the run's task went first, before the first byte).
    """
    planning = plan_chat(admitted.request, admitted.caller, admitted.opened)
    if admitted.opened is None:
        return await run_until_disconnect(watch, planning)
    plan = await planning
    return watch.disconnected, plan


class ChatConsumer:
    """ASGI app of the chat route (HTTP only). Use ``ChatConsumer.as_asgi()`` in a URLRouter."""

    @classmethod
    def as_asgi(cls) -> ChatConsumer:
        """Return an ASGI application instance (Channels' naming)."""
        return cls()

    async def refuse(
        self, send: Any, exc: BaseException, headers: list[tuple[bytes, bytes]], *, language: str | None = None
    ) -> None:
        """Send the typed refusal of ``exc`` in ``language`` (a route built on this one may answer some otherwise)."""
        await send_error(send, exc, headers=headers, language=language)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one request through the host's middleware (:mod:`~helix_django.transport.host`)."""
        if scope["type"] != "http":
            raise ValueError("The chat route serves HTTP only")
        planned = await self._plan(scope, receive, send)
        # The scope is the router's copy (its url_route too): an open response keeps neither.
        del scope
        if planned is None:
            return
        # Only the plan, the headers and the disconnect watch outlive the planning: an open response
        # holds no request, DRF object or user (idle memory per response).
        plan, headers, watch = planned
        del planned
        if plan.status == 204:
            await watch.close()
            await send_empty(send, 204, headers=headers)
            return
        if plan.queued is not None:
            await watch.close()
            await send_json(send, 202, {"queued": plan.queued}, headers=headers)
            return
        response = StreamedResponse(send, receive, heartbeat_seconds=helix_settings.HEARTBEAT_SECONDS, watch=watch)
        del watch
        frames = plan_frames(plan, first_part_at_once=True)
        del plan  # the frames hold what they send
        # The headers and the replayed frames take two sends.
        await response.run(200, UI_STREAM_HEADERS + headers, frames, first_part_ready=True)

    async def _plan(
        self, scope: dict[str, Any], receive: Any, send: Any
    ) -> tuple[ResponsePlan, list[tuple[bytes, bytes]], DisconnectWatch] | None:
        """Authenticate and plan; return ``(plan, headers, watch)``, or None once answered (a refusal, a disconnect).

        ``watch`` watches the client from the planning on: the response keeps it (one watcher per request).
        """
        headers: list[tuple[bytes, bytes]] = []
        language: str | None = None
        watch: DisconnectWatch | None = None
        try:
            answer = await _read_and_admit(scope, receive)
            if answer.response is not None:
                await send_host_response(send, answer.response)
                return None
            headers, language = answer.headers, answer.language
            admitted = answer.unwrap()
            headers = headers + admitted.caller.identity.set_cookies
            if admitted.error is not None:
                raise admitted.error
            watch = DisconnectWatch(receive)
            disconnected, plan = await _plan_watched(admitted, watch)
        except ClientDisconnected:
            return None
        except Exception as exc:  # every refusal is typed; an unexpected one is rendered without its text
            if watch is not None:
                await watch.close()
            log_unexpected("chat route", exc)
            await self.refuse(send, exc, headers, language=language)
            return None
        except BaseException:  # the server cancelled the request
            if watch is not None:
                watch.task.cancel()
            raise
        if disconnected:
            await watch.close()
            if plan is not None:
                await plan.close()  # its reader's wake-up subscription
            return None
        return plan, headers, watch
