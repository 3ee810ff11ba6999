"""The guard every new attempt or generation passes: never redo a turn over an unknown side effect.

000, "Reconcile before retrying unknown side effects" and "Recovery should have bounded
automation": when a side-effecting tool of a turn started and its outcome was never
recorded (``unknown``), a new attempt of that turn (Regenerate, an edit of its user
message) or a new generation continuing it (Continue) could make the model call the tool
again. Such a start is refused until the outcome is resolved: the tool's own ``reconcile``
is asked first (:mod:`.tool_reconcile`), then staff mark it executed with its result, or
not executed. The recovery inventory offers neither action in that state
(:func:`helix_django.recovery.inventory.blocking_tools`, the same predicate); this guard
sits in the executor's one run-start path, so every route that starts a run obeys it:
the chat route, the WebSocket, the REST recovery routes, the admin, keyed requests.

A send of a new turn that leaves the earlier turn as it is redoes nothing: it passes.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from helix_django import store
from helix_django.errors import RunNotActionableError
from helix_django.models import ChatSession, Message, ToolEffect, ToolExecution, ToolExecutionStatus
from helix_django.orm import sync_to_async
from helix_django.recovery.inventory import blocking_tools
from helix_django.runtime.agents import UnknownAgentError, get_agent
from helix_django.runtime.tool_reconcile import areconcile_all

#: Run kinds that redo or continue the session's current run (the run the start replaces).
REDOING_KINDS = frozenset({"regenerate", "continue"})


def is_redo(request: store.RunStartRequest) -> bool:
    """Whether ``request`` may redo an earlier answer (no query: a plain send answers False).

    True for a ``regenerate`` / ``continue``, a rewind (``truncate_to``), or an input that
    is an assistant message (a continuation re-opening it).
    """
    return (
        request.kind in REDOING_KINDS
        or request.truncate_to is not None
        or any(m.get("role") == "assistant" for m in request.input_messages)
    )


def redone_run_ids(request: store.RunStartRequest) -> set[str]:
    """Return the ids of the runs whose answer ``request`` would redo, rewind or re-open.

    - the current run it replaces, for a ``regenerate`` or ``continue``;
    - with ``truncate_to``: the runs that wrote the active rows the rewind removes, and the
      session's current run when its answer lies in the removed range (it may have no row);
    - the runs that wrote the active rows the request re-opens (an input whose id is an
      active row: the message a continuation appends to).

    A few indexed queries; call inside a sync context.
    """
    runs: set[str] = set()
    if request.kind in REDOING_KINDS and isinstance(request.expected_current_run_id, str):
        runs.add(request.expected_current_run_id)
    rows = Message.objects.filter(session_id=request.session_id, position__isnull=False, run__isnull=False)
    if request.truncate_to is not None:
        runs.update(rows.filter(position__gte=request.truncate_to).values_list("run_id", flat=True))
        current = (
            ChatSession.objects.filter(pk=request.session_id, current_run__start_message_count__gte=request.truncate_to)
            .values_list("current_run_id", flat=True)
            .first()
        )
        if current:
            runs.add(current)
    reopened = [m["id"] for m in request.input_messages if isinstance(m.get("id"), str)]
    if reopened:
        runs.update(rows.filter(ui_id__in=reopened).values_list("run_id", flat=True))
    return runs


def blocking_executions(request: store.RunStartRequest) -> list[ToolExecution]:
    """Return the side-effecting executions with an unknown outcome in the runs ``request`` redoes (with their run)."""
    if request.new_session is not None or not is_redo(request):
        return []  # a chat's first send, or a new turn: nothing earlier is redone
    runs = redone_run_ids(request)
    if not runs:
        return []
    candidates = ToolExecution.objects.filter(run_id__in=runs, effect=ToolEffect.SIDE_EFFECT).select_related("run")
    return blocking_tools(list(candidates))


def check_no_unknown_side_effects(request: store.RunStartRequest) -> None:
    """Refuse ``request`` when a run it redoes has a side-effecting tool with an unknown outcome.

    Raises RunNotActionableError (409 ``state_run_not_actionable``, ``cause:
    tool_outcome_unknown``); the message names the tools, never their arguments.
    Called before the run-start commit, so a refusal writes nothing.
    """
    names = sorted({e.name for e in blocking_executions(request)})
    if names:
        raise RunNotActionableError(
            f"The side-effecting tool {', '.join(names)} may already have run: its outcome is unknown. "
            "Resolve it first (mark it executed with its result, or not executed).",
            cause="tool_outcome_unknown",
        )


async def aask_tools(request: store.RunStartRequest) -> int:
    """Ask the tools of the executions that would block ``request`` to reconcile them; return how many settled.

    Each blocking execution whose tool declares ``reconcile`` is asked once
    (:mod:`.tool_reconcile`). A redo calls it before it reads any execution record (the
    context it builds sees the answers); :func:`acheck_no_unknown_side_effects` otherwise.
    """
    blocking = await sync_to_async(blocking_executions)(request)
    return await areconcile_all(blocking, tool_of) if blocking else 0


async def acheck_no_unknown_side_effects(request: store.RunStartRequest, *, ask_tools: bool = True) -> None:
    """:func:`check_no_unknown_side_effects`, after the blocking executions' tools were asked (:func:`aask_tools`).

    ``ask_tools=False``: the caller asked them already for this start. Raises RunNotActionableError.
    """
    if ask_tools:
        await aask_tools(request)
    await sync_to_async(check_no_unknown_side_effects)(request)


async def areconcile_run(run_id: str) -> int:
    """Ask the tools of ``run_id``'s unknown side-effecting executions to reconcile them; return how many settled.

    The relaunch scan calls it for a run it interrupted, so a tool that can tell settles its
    outcome before staff see it (:mod:`.tool_reconcile`).
    """
    unknown = ToolExecution.objects.filter(
        run_id=run_id, effect=ToolEffect.SIDE_EFFECT, status=ToolExecutionStatus.UNKNOWN
    ).select_related("run")
    executions = [execution async for execution in unknown]
    return await areconcile_all(executions, tool_of) if executions else 0


def tool_of(execution: ToolExecution) -> Any:
    """Return the Tool ``execution`` ran under its run's agent, or None (the agent or the tool is gone)."""
    try:
        return get_agent(execution.run.agent).tools.get(execution.name)
    except (UnknownAgentError, ImproperlyConfigured):
        return None
