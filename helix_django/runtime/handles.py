"""Value objects shared by the executor's entry points: RunHandle, Launch, Entry."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from typing import TYPE_CHECKING, Any

from helix_django import store
from helix_django.models import Run, RunStatus

if TYPE_CHECKING:
    from helix_django.runtime.agent import RunLoop


@dataclasses.dataclass(frozen=True)
class RunHandle:
    """What a caller needs to stream a run: read the session stream after ``from_sequence``.

    ``is_duplicate``: a keyed repeat attached to the original run (002, "Retried sends and
    request keys"). ``is_pending_batch``: a tool-result request left the client-tool batch
    partial; nothing was started and the run stays suspended (002: an empty 200 stream).
    ``run``: the Run as of the handle's creation when the entry point had it at hand (a
    copy the caller may keep; None otherwise: read it by ``run_id``).
    """

    run_id: str
    stream_id: str
    response_message_id: str
    from_sequence: int
    is_duplicate: bool = False
    run_status: str = RunStatus.STARTING
    is_pending_batch: bool = False
    run: Run | None = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass
class Entry:
    """A run executing in this process."""

    claimed: concurrent.futures.Future[bool] = dataclasses.field(default_factory=concurrent.futures.Future)
    done: concurrent.futures.Future[str] = dataclasses.field(default_factory=concurrent.futures.Future)
    loop: RunLoop | None = None
    task: asyncio.Task[Any] | None = None
    event_loop: asyncio.AbstractEventLoop | None = None
    started: bool = False
    """The run's task took its first step (a Stop before it is seen by the run at its start)."""
    is_cancel_requested: bool = False
    """A Stop reached this process's entry: set before its task exists too (the stream claim in flight),
    so the run's task starts with ``is_cancel_requested`` and ends ``cancelled`` before its first step."""


@dataclasses.dataclass
class Launch:
    """How to open a run after its run-start commit (chunks, re-opened message, tools to run)."""

    request: store.RunStartRequest
    prelude: Any = None
    """``callable(RunStartResult) -> [chunk]`` written right after ``start``."""
    parts: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    approved: list[tuple[Any, dict[str, Any], str]] = dataclasses.field(default_factory=list)
    add_continue_instruction: bool = False
    tools_asked: bool = False
    """The redo asked its unknown executions' tools to reconcile them already (:func:`.guards.aask_tools`)."""
