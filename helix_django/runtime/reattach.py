"""Re-attach a run whose process was gone to its durable provider operation: it goes on here as the same run.

000, "Resume, continue, regenerate, and reconcile are different" (Resume: continue receiving
the same provider operation after an interruption) and "Background operations are easier to
recover than ephemeral streams". The relaunch scan (:mod:`helix_django.recovery.scan`) took
the run's lease, fenced its stream (paused at the run's epoch) and moved it to
``recovering``; it then hands the run to :func:`areattach` when the operation still runs
(or completed asking for tools). Here the run:

1. is rebuilt from its stream: the response message as of its last step commit plus its
   later chunks (:mod:`helix_django.recovery.partial`), and the attempt it was streaming
   (its last ``start-step``): id, step, the text and reasoning it holds, its open parts;
2. re-claims its stream at the run's epoch (the same claim, re-activated after the pause),
   and goes ``recovering`` -> ``streaming`` under this process's lease;
3. runs as a local run of this process (:class:`~helix_django.runtime.local_runs.LocalRuns`:
   a Stop cancels it, the SIGTERM drain covers it, a later crash is recovered again the same
   way): same run id, attempt, response message id and step; its first step goes on with
   the operation's rest (:class:`~helix_django.runtime.steps.Resumption`: replayed from the
   operation's start, what the stream holds skipped), appended to the same stream, so a
   reader resuming from its cursor gets the remaining deltas once, then the normal end. A
   step that asked for tools goes on under the durable tool-record rules of the agent loop.

Not re-attached (False; the scan keeps its follow path): an attempt already past its
stream (a ``finish-step`` or tool chunks stored), a step with a tool execution record (a
tool that may have started is never run again: the scan records it ``unknown``), a stream another run holds, a run
changed meanwhile, a process draining.
"""

from __future__ import annotations

import logging
from typing import Any

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.errors import StreamFenceError
from helix_django.models import Run, RunStatus, ToolExecution
from helix_django.orm import sync_to_async
from helix_django.protocol import ATTEMPT_KEY, STEP_KEY
from helix_django.recovery.partial import StoredChunk, apply_chunks, aread_run_chunks, base_message
from helix_django.runtime import requests as rq
from helix_django.runtime import shutdown
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.agents import get_agent
from helix_django.runtime.local_runs import LocalRuns
from helix_django.runtime.steps import Resumption
from helix_django.streams import get_stream_manager
from helix_django.streams.writer import StreamWriter

logger = logging.getLogger("helix_django.runtime.executor")

#: Chunk types that show the attempt got past its stream (its tools, its step's end).
PAST_STREAM = frozenset({"finish-step", "finish", "tool-input-available", "tool-input-error", "tool-output-available"})


def resumption_of(run: Run, base: dict[str, Any] | None, tail: list[StoredChunk]) -> Resumption | None:
    """Return the attempt ``run`` was streaming, from its chunks after its last step commit; None when none.

    ``base`` is the response message as of that commit, ``tail`` the run's chunks after it.
    None when the tail has no ``start-step`` of a live attempt, or the attempt got past its
    stream (:data:`PAST_STREAM`).
    """
    retired = {
        (c.get("data") or {}).get("supersededAttemptId") for _s, c in tail if c.get("type") == "data-attempt-superseded"
    }
    starts = [(s, c) for s, c in tail if c.get("type") == "start-step" and c.get(ATTEMPT_KEY) not in retired]
    if not starts:
        return None
    start_sequence, start = starts[-1]
    attempt_id = str(start[ATTEMPT_KEY])
    after = [c for s, c in tail if s > start_sequence]
    if any(c.get("type") in PAST_STREAM for c in after):
        return None
    resumed = Resumption(
        attempt_id=attempt_id,
        step=int(start.get(STEP_KEY) or run.step_count + 1),
        operation_id=run.provider_operation_id,
        before=apply_chunks(
            base, run.response_message_id, [(s, c) for s, c in tail if c.get(ATTEMPT_KEY) != attempt_id]
        ),
    )
    texts: dict[str, list[str]] = {"text": [], "reasoning": []}
    for chunk in after:
        kind, _dash, what = str(chunk.get("type", "")).partition("-")
        if chunk.get(ATTEMPT_KEY) != attempt_id or kind not in texts:
            continue
        if what == "start":
            resumed.part_count += 1
            resumed.open_parts[kind] = chunk["id"]
        elif what == "end" and resumed.open_parts.get(kind) == chunk.get("id"):
            del resumed.open_parts[kind]
        elif what == "delta":
            texts[kind].append(chunk.get("delta", ""))
    resumed.text, resumed.reasoning = "".join(texts["text"]), "".join(texts["reasoning"])
    return resumed


async def areattach(runs: LocalRuns, owner: str, run_id: str) -> bool:
    """Go on with the ``recovering`` run ``run_id`` here, as the same run (module docstring); True once its task runs.

    Call it where runs live (the executor's ``runs.runner.call``). ``owner`` is this
    process's lease owner id. False when the run cannot be re-attached: the caller keeps it
    ``recovering`` and follows it instead. Raises StreamConnectionError when the stream
    cannot be read or claimed.
    """
    if shutdown.is_draining() or runs.is_local(run_id):
        return False
    run = await Run.objects.filter(pk=run_id, status=RunStatus.RECOVERING).afirst()
    if run is None or not run.provider_operation_id:
        return False
    agent = get_agent(run.agent)
    if not (agent.provider.supports_stream_from or agent.provider.supports_retrieve):
        return False
    base, after = await sync_to_async(base_message)(run)
    chunks = await aread_run_chunks(run)
    tail = [(s, c) for s, c in chunks if s > after]
    resumed = resumption_of(run, base, tail)
    if resumed is None or await ToolExecution.objects.filter(run_id=run.id, step=resumed.step).aexists():
        return False  # a tool of the step has a record (it may have started): the scan's rules decide
    manager = get_stream_manager()
    info = await manager.get_info(run.session_id)
    if info is None or info.run_id != run.id:
        return False
    try:  # the run's own claim, re-activated after the scan's pause
        claimed = await manager.claim_stream(run.session_id, run.id, epoch=info.epoch)
    except StreamFenceError:
        return False
    moved = await store.atransition_run(
        run.id,
        frozenset({RunStatus.RECOVERING}),
        RunStatus.STREAMING,
        lease_owner=owner,
        lease_seconds=helix_settings.LEASE_SECONDS,
    )
    if not moved:  # a Stop or staff's decision came first: the stream goes back to its pause
        await manager.pause_stream(run.session_id, run.id)
        return False
    run = await Run.objects.aget(pk=run.id)
    writer = StreamWriter.from_settings(manager, run.session_id, run.id)
    writer.last_sequence = claimed.head_sequence
    loop = RunLoop(
        run=run,
        agent=agent,
        writer=writer,
        acc=apply_chunks(base, run.response_message_id, tail),
        owner=owner,
        context=await rq.aload_rows(run.session_id, run.start_message_count),
    )
    loop.step, loop.has_first_token, loop.resumption = resumed.step - 1, True, resumed
    entry = runs.open(run.id)
    runs.start_task(entry, loop)
    entry.claimed.set_result(True)
    shutdown.install(runs)
    logger.info("run %s re-attached to its provider operation (step %s)", run.id, resumed.step)
    return True
