"""A run's completion in one thread hop: its last step's commit, the terminal commit, its last chunks.

The chunks are stored in the order separate writes would store them on every stream
manager: the run's unflushed chunks with ``finish-step`` (when its last step ends here)
and ``finish``; then, in one transaction, the step commit and the terminal commit
(``completed``); then ``helix-step-committed`` naming the step's checkpoint and
``helix-run-end``; then the stream's end. With the database stream manager on the
store's database all of it is one transaction (:func:`complete_in_transaction`): it
lands whole or not at all. Elsewhere (Redis, memory) the stream writes make no thread
hop and the two commits are one (:func:`helix_django.store.commit_completion`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from typing import Any, TypeVar

from django.db import transaction

from helix_django import store
from helix_django.orm import retrying
from helix_django.store.reads import write_alias
from helix_django.streams.base import Chunk
from helix_django.streams.transactions import TransactionalWrites

T = TypeVar("T")


@dataclasses.dataclass
class Completion:
    """What a completing run writes last (the chunks prepared: stamped and applied to its message).

    ``chunks``: the writer's unflushed chunks, ``finish`` last (``finish-step`` right
    before it, unless already stored at ``stored_sequence``). ``message``: the response
    message as completed. ``step_message``, ``step_number``, ``step_committed``: the last
    step to commit with it (None when no step ends here); its ``helix-step-committed``
    chunk gets its ``checkpointId`` once the step checkpoint exists.
    """

    chunks: list[Chunk]
    message: dict[str, Any]
    end: Chunk
    stored_sequence: int
    step_message: dict[str, Any] | None = None
    step_number: int = 0
    step_committed: Chunk | None = None
    is_stored: bool = False
    """Set once ``chunks`` are stored (a failure after it must not hand them back to the writer)."""
    usage: dict[str, Any] | None = None
    """The run's usage record (:mod:`helix_django.usage`)."""

    def commit(self, run_id: str, sequences: list[int], *, fenced: bool = False) -> Any:
        """Commit the step and the completion, the chunks stored at ``sequences``; return the terminal checkpoint.

        ``fenced``: the caller's transaction passed ``store.lock_run`` already.
        """
        stored_step_end = sequences[-2] if len(sequences) >= 2 else self.stored_sequence
        step, terminal = store.commit_completion(
            run_id,
            response_message=self.message,
            stream_sequence=sequences[-1],
            step_message=self.step_message,
            step_sequence=stored_step_end,
            step_count=self.step_number,
            fenced=fenced,
            usage=self.usage,
        )
        if step is not None and self.step_committed is not None:
            self.step_committed["checkpointId"] = step.id
        return terminal

    def closing(self) -> list[Chunk]:
        """The chunks written after the commits: ``helix-step-committed`` (with a step), ``helix-run-end``."""
        return [chunk for chunk in (self.step_committed, self.end) if chunk is not None]


def complete_in_transaction(
    transactions: TransactionalWrites, stream_id: str, run_id: str, completion: Completion
) -> tuple[Any, list]:
    """Store and commit ``completion`` in one transaction, on the ORM's thread (the database stream manager).

    The session row is locked first, as every run write locks it. Returns (the terminal
    checkpoint, the stream writes for ``transactions.wrote``). Raises
    RunSupersededError / StreamFenceError: nothing is written. Safe to run again after a
    failed attempt: its transaction committed nothing.
    """
    with transaction.atomic(using=write_alias()):
        store.lock_run(run_id)
        first = transactions.append(stream_id, run_id, completion.chunks)
        terminal = completion.commit(run_id, first.sequences, fenced=True)
        last = transactions.append(stream_id, run_id, completion.closing())
        ended = transactions.end(stream_id, run_id, end_status="completed")
    return terminal, [first, last, ended]


acomplete_in_transaction = retrying(complete_in_transaction, what="run completion")
acommit_completion = retrying(Completion.commit, what="run completion")
"""``await acommit_completion(completion, run_id, sequences)``: :meth:`Completion.commit` on the ORM's thread."""


async def outlasting_cancel(writes: Awaitable[T]) -> T:
    """Await a completion's ``writes`` in a task of their own, which a cancel of the caller does not stop.

    A cancel that lands meanwhile (a user's Stop whose fenced request committed just before
    the completion's transaction) waits for them: the thread they run on commits whatever
    the caller does. When they succeeded the run is completed, so the cancel is dropped
    (as when the Stop's fenced request loses the race) and the result returned; when they
    failed, the CancelledError is raised (the cancelled ending follows). Other failures
    are raised as they are.
    """
    task = asyncio.ensure_future(writes)
    caller = asyncio.current_task()
    if caller is not None:  # named after the run's task (helix-run-<id>): logs and hop counts tell whose it is
        task.set_name(f"{caller.get_name()}:completion")
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                continue  # cancelled again: the writes still decide
        if task.cancelled() or task.exception() is not None:
            raise
        uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python >= 3.11
        if uncancel is not None:
            uncancel()  # the cancel was answered: the task is not "cancelling" any more
        return task.result()
