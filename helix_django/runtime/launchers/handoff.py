"""Runs on workers: the web process commits and claims, a worker process executes (base of queue launchers).

:class:`HandoffLauncher` lets the executor do everything up to the opening chunks
(run-start commit, stream claim, ``helix-run-start``/``start`` stored, so the stream is
readable when ``execute()`` returns) and then enqueues the run instead of starting a
local task; its subclasses are the Django Tasks launcher (:mod:`.tasks`) and the Celery
launcher (:mod:`.celery`). Until a worker takes it, the run's lease is held by the web
executor (a hand-off lease of ``LEASE_SECONDS``). A worker takes the run with a
compare-and-set from that owner to its own (:func:`helix_django.store.take_over_lease`),
so of several workers given the same run only one executes it; it then renews the lease
while it runs. A worker killed mid-run leaves a lease that expires, and the relaunch scan
(:mod:`helix_django.recovery.scan`) marks the run interrupted with its partial output;
nothing runs it again on its own (000, "Recovery on app relaunch").
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.core.checks import CheckMessage
from django.core.checks import Warning as CheckWarning
from django.utils import timezone

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.models import Run
from helix_django.orm import sync_to_async
from helix_django.processes import lease_owner_id
from helix_django.protocol import MessageAccumulator
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.agents import get_agent
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.runtime.launchers.base import BaseLauncher
from helix_django.runtime.local_runs import LocalRuns
from helix_django.streams import get_stream_manager
from helix_django.streams.writer import StreamWriter

logger = logging.getLogger(__name__)

NO_SHARED_LAYER = "no shared channel layer: use the Redis stream manager or a channels_redis layer"


def launch_data(launch: Launch, user: Any) -> dict[str, Any]:
    """Return the JSON form of what a worker needs beyond the database to execute a run.

    Shape: ``{"parts": [...]|None, "metadata": {...}|None, "approved": [[tool_name, arguments,
    tool_call_id], ...], "add_continue_instruction": bool, "user_id": <pk as str>|None}``.
    """
    return {
        "parts": launch.parts,
        "metadata": launch.metadata,
        "approved": [[tool.name, arguments, call_id] for tool, arguments, call_id in launch.approved],
        "add_continue_instruction": launch.add_continue_instruction,
        "user_id": str(user.pk) if getattr(user, "pk", None) is not None else None,
    }


class HandoffLauncher(BaseLauncher, abc.ABC):
    """Hands each run to a worker after the run-start commit (module docstring); subclasses enqueue.

    A subclass implements :meth:`enqueue` (send its arguments to a worker that awaits
    :func:`arun_handed_off` with them).
    """

    lease_owner_kind = "handoff"
    executes_at_once = False

    worker_kind = "task"
    """Names the kind of worker in log lines."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self._handoffs: dict[str, RunLoop] = {}
        if self.check():
            # Workers write in other processes: readers here would only wake on their fail-safe timer.
            logger.warning("%s with stream manager %s and %s", type(self).__name__, _manager_name(), NO_SHARED_LAYER)

    def check(self) -> list[CheckMessage]:
        """Warn when readers in this process cannot be woken by a worker's writes (``helix_django.W012``)."""
        manager = get_stream_manager()
        if manager.wakes_other_processes:
            return []
        return [
            CheckWarning(
                f"{type(self).__name__} with stream manager {_manager_name()}: {NO_SHARED_LAYER}.",
                hint="Workers write in other processes: configure a channels_redis layer or the Redis stream manager.",
                id="helix_django.W012",
            )
        ]

    async def dispatch(self, runs: LocalRuns, entry: Entry, loop: RunLoop) -> None:
        """Keep the opened run for :meth:`launched` to enqueue; no local task."""
        runs.drop(loop.run_id)
        self._handoffs[loop.run_id] = loop
        entry.done.set_result("handed_off")

    async def launched(self, runs: LocalRuns, handle: RunHandle, launch: Launch, user: Any, owner: str) -> RunHandle:
        """Enqueue the run for a worker; a failed enqueue ends the run ``failed``, typed, on its stream."""
        loop = self._handoffs.pop(handle.run_id, None)
        if loop is None:  # ended elsewhere before its stream claim landed: nothing to hand off
            return handle
        try:
            await self.enqueue(handle.run_id, owner, launch_data(launch, user))
        except Exception as exc:  # noqa: BLE001 - any enqueue failure ends the run, typed, on its stream
            logger.error(
                "run %s could not be handed to a %s worker: %s", handle.run_id, self.worker_kind, type(exc).__name__
            )
            await runs.runner.call(loop._ending(loop._end_failed(exc)))
        return handle

    @abc.abstractmethod
    async def enqueue(self, run_id: str, from_owner: str, data: dict[str, Any]) -> None:
        """Send ``(run_id, from_owner, data)`` to a worker that awaits :func:`arun_handed_off` with them."""

    def is_queued(self, run: Run, owner: str) -> bool:
        """Our own unexpired lease on a run with no local task means "queued for a worker"."""
        return bool(run.lease_owner == owner and run.lease_expires_at and run.lease_expires_at > timezone.now())


def _manager_name() -> str:
    return type(get_stream_manager()).__name__


def worker_owner() -> str:
    """Return a lease owner id for one execution on this worker process."""
    return lease_owner_id("worker")


def _user(user_id: str | None) -> Any:
    if user_id is None:
        return None
    return get_user_model().objects.filter(pk=user_id).first()


async def arun_handed_off(run_id: str, from_owner: str, data: dict[str, Any]) -> str:
    """Take ``run_id`` from ``from_owner`` (compare-and-set on the lease) and execute it here.

    Returns the run's final status, or ``"skipped"`` when another worker (or the relaunch
    scan) has it. The chunks the web process wrote are re-applied to the response message,
    so the committed message matches the stream.
    """
    owner = worker_owner()
    if not await store.atake_over_lease(run_id, from_owner, owner, helix_settings.LEASE_SECONDS):
        logger.info("run %s is not ours to execute (taken or ended); skipping", run_id)
        return "skipped"
    run = await Run.objects.select_related("session").aget(pk=run_id)
    session = run.session
    agent = get_agent(run.agent or session.agent)
    manager = get_stream_manager()
    writer = StreamWriter.from_settings(manager, session.stream_id, run.id)
    acc = MessageAccumulator(run.response_message_id, parts=data.get("parts"), metadata=data.get("metadata"))
    for sequence, chunk in await manager.read_all(session.stream_id, after=run.start_sequence):
        if chunk.get("_run") == run.id:
            acc.apply(chunk)
            writer.last_sequence = sequence
    approved = [(agent.tools[name], arguments, call_id) for name, arguments, call_id in data.get("approved", [])]
    loop = RunLoop(
        run=run,
        agent=agent,
        writer=writer,
        acc=acc,
        owner=owner,
        user=await sync_to_async(_user)(data.get("user_id")),
        approved=approved,
        add_continue_instruction=bool(data.get("add_continue_instruction")),
    )
    loop.task = asyncio.current_task()
    status = await loop.run_forever()
    logger.info("run %s executed on %s: %s", run_id, owner, status)
    return status
