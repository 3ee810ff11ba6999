"""A send of the chat route: its plan once started, what may join the route's one thread hop.

:func:`plan_send` executes a send through ``execute()`` (every kind of send);
:func:`plan_handle` plans the stream of a started run after its handle's ``from_sequence``.
A plain send (:func:`is_plain_chat_send`) may instead start inside the route's thread hop
(:func:`helix_django.transport.chat._admit`), with its stream head read on the loop first
where that makes no hop (:func:`loop_head`).
"""

from __future__ import annotations

import dataclasses

from helix_django.deadlines import completes_despite_cancel
from helix_django.errors import HelixError
from helix_django.models import ChatSession, Run
from helix_django.runtime.enqueue import QueuedSend
from helix_django.runtime.executor import get_executor
from helix_django.runtime.handles import RunHandle
from helix_django.runtime.sends import is_plain_send
from helix_django.streams import get_stream_manager
from helix_django.transport.auth import Identity
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.plan import ResponsePlan, read_plan
from helix_django.transport.replay import ResponseFilter, tool_call_ids


@dataclasses.dataclass(frozen=True)
class OpenedSend:
    """A send the route's thread hop started, opened on the loop."""

    session: ChatSession
    handle: RunHandle


async def plan_send(request: ChatRequest, identity: Identity, session: ChatSession) -> ResponsePlan:
    """Execute the send and plan its stream after the handle's ``from_sequence``.

    A new run's chunks follow its start (the head when its run-start commit read it); a
    keyed duplicate streams the original run from its start; a send queued behind the live
    run (multitask ``enqueue``) is a ``202`` plan. Raises the executor's typed
    errors (409 ``state_already_running``, ``state_request_key_conflict``, ...); a new
    session exists only once its first run-start commit landed.
    """
    execute = get_executor().execute(
        session=session,
        messages=request.messages,
        request_key=request.request_key,
        trigger=request.trigger,
        message_id=request.message_id,
        user=identity.user,
        multitask=request.multitask,
    )
    handle = await completes_despite_cancel(execute)
    if isinstance(handle, QueuedSend):  # multitask enqueue: the message waits for the live run's end
        return ResponsePlan(status=202, queued=handle.to_body())
    return await plan_handle(request, session, handle)


async def plan_handle(request: ChatRequest, session: ChatSession, handle: RunHandle) -> ResponsePlan:
    """Plan the stream of a started send's run after its handle's ``from_sequence``."""
    if handle.is_pending_batch:
        return ResponsePlan(is_empty=True)  # a partial client-tool batch: an empty 200 stream (002)
    run = handle.run or await Run.objects.aget(pk=handle.run_id)
    last = request.messages[-1]
    response_filter = ResponseFilter(
        run_id=run.id, owned_tool_call_ids=tool_call_ids(last) if last["role"] == "assistant" else ()
    )
    # The stream was claimed before execute() returned; the reader ends at the stream's
    # terminal, the filter at the run's own end (or follows a run that superseded it).
    return await read_plan(
        get_stream_manager(),
        session.stream_id,
        run=run,
        from_sequence=handle.from_sequence,
        response_filter=response_filter,
        follow=True,
    )


def is_plain_chat_send(request: ChatRequest | None) -> bool:
    """Whether ``request`` is a POST of a plain send (:func:`~helix_django.runtime.sends.is_plain_send`)."""
    return (
        request is not None
        and request.method == "POST"
        and is_plain_send(request.messages, trigger=request.trigger, message_id=request.message_id)
    )


async def loop_head(request: ChatRequest | None) -> int | None:
    """Read the stream head of a send's session on the loop where that makes no thread hop; None otherwise.

    Only for a body that carries history (a next message: its session exists) and a
    stream manager that reads without a thread hop (memory, Redis); the database manager
    reads it in the route's hop. A failed read is None: the send then takes ``execute()``'s path.
    """
    manager = get_stream_manager()
    if not is_plain_chat_send(request) or not manager.supports_info_without_hop:
        return None
    assert request is not None  # is_plain_chat_send refuses None
    if len(request.messages) < 2:
        return None
    try:
        info = await manager.get_info(request.session_id)
    except HelixError:
        return None
    return info.head_sequence if info else 0
