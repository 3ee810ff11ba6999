"""Scale-out: runs executed by Django Tasks workers (``HELIX["EXECUTOR"] = ".../tasks.TasksExecutor"``).

The web process does everything a send must do before it answers: the run-start commit,
the stream claim and the opening chunks (so the stream is readable when ``execute()``
returns, as with the local executor). It then enqueues :data:`execute_run`; a task worker
(any process with the same database and stream manager) claims the run's lease, rebuilds
the response message from the run's stored chunks and runs the agent loop. A run whose
task is never picked up loses its lease and is found by the relaunch scan, like a run of
a crashed process: nothing restarts it on its own.

Configure a Django Tasks backend with a real worker (``TASKS = {"default": {...}}``); the
task is ``async`` and takes JSON arguments only.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django_tasks import task

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.models import ChatSession, Run, RunStatus
from helix_django.runtime import requests as rq
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.agents import get_agent
from helix_django.runtime.context import to_provider_messages
from helix_django.runtime.executor import LocalExecutor
from helix_django.runtime.handles import Entry
from helix_django.streams import get_stream_manager
from helix_django.streams.base import StreamWriter


class TasksExecutor(LocalExecutor):
    """Starts runs here and hands their execution to Django Tasks workers (DESIGN, "Embedded default and scale-out")."""

    def _new_lease_owner(self) -> str:
        # The worker that picks the task up holds the lease under the same owner id.
        return f"helix-task:{uuid.uuid4().hex}"

    async def _dispatch(self, entry: Entry, loop: RunLoop) -> None:
        user = loop.user
        approved = [[tool_obj.name, arguments, call_id] for tool_obj, arguments, call_id in loop.approved]
        await execute_run.aenqueue(
            loop.run_id,
            owner=loop.owner,
            approved=approved,
            add_continue_instruction=loop.add_continue_instruction,
            user_id=getattr(user, "pk", None),
        )
        self._entries.pop(loop.run_id, None)
        entry.done.set_result("dispatched")


async def _rebuild(run: Run) -> Any:
    """The response message as the web process left it: the run's base row + its stored chunks."""
    from helix_django.recovery.partial import apply_chunks, aread_run_chunks

    base = None
    if run.kind in ("tool_result", "continue"):
        base = await rq.aload_response_row(run.session_id, run.start_message_count, run.response_message_id)
    chunks = await aread_run_chunks(run)
    acc = apply_chunks(base, run.response_message_id, chunks)
    if base is not None:
        acc.message["metadata"] = dict(base.get("metadata") or {})
    return acc, (chunks[-1][0] if chunks else run.start_sequence)


@task()
async def execute_run(
    run_id: str, *, owner: str, approved: list[Any], add_continue_instruction: bool, user_id: Any = None
) -> str:
    """Execute a run opened by :class:`TasksExecutor` (in a task worker); return its final status.

    Returns ``not_claimed`` when the run is no longer live or another worker holds its lease.
    """
    if not await store.aclaim_lease(run_id, owner, helix_settings.LEASE_SECONDS):
        return "not_claimed"
    run = await Run.objects.aget(pk=run_id)
    session = await ChatSession.objects.aget(pk=run.session_id)
    agent = get_agent(run.agent)
    acc, last_sequence = await _rebuild(run)
    writer = StreamWriter(
        get_stream_manager(),
        session.stream_id,
        run.id,
        flush_interval_ms=helix_settings.FLUSH_INTERVAL_MS,
        max_chunks=helix_settings.FLUSH_MAX_CHUNKS,
    )
    writer.last_sequence = last_sequence
    user = None
    if user_id is not None:
        user = await sync_to_async(get_user_model().objects.filter(pk=user_id).first)()
    loop = RunLoop(
        run=run,
        agent=agent,
        writer=writer,
        acc=acc,
        context=to_provider_messages(await rq.aload_rows(session.id, run.start_message_count)),
        owner=owner,
        user=user,
        approved=[(agent.tools[name], arguments, call_id) for name, arguments, call_id in approved],
        add_continue_instruction=add_continue_instruction,
    )
    loop.task = asyncio.current_task()
    try:
        return await loop.run_forever()
    except asyncio.CancelledError:
        return RunStatus.STREAMING  # the worker is going away; the lease will expire
