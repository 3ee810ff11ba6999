"""Tools that reconcile: a side-effecting tool asked about its own ``unknown`` execution before staff are.

000, "Reconcile before retrying unknown side effects": an execution whose process stopped
after it started has an ``unknown`` outcome, and nothing may run the tool again on its own.
A tool that can ask the external system (by the execution's ``idempotency_key``: the email
provider's message key, the payment's idempotency key) declares it::

    def was_sent(execution) -> Reconciled | None:
        found = outbox.lookup(execution.idempotency_key)
        return None if found is None else Reconciled(happened=found.sent, result=found.receipt)

    @tool(effect="side_effect", reconcile=was_sent)
    def send_email(to: str, subject: str, body: str) -> dict: ...

It is asked when a redo of the turn meets the execution (Regenerate, Continue, an edit:
:mod:`.guards`) and when a call of the same effect meets it (:mod:`.tools`), once per
such meeting, bounded by :data:`RECONCILE_SECONDS`. Its answer is recorded on the
execution: ``succeeded`` with its result (the effect happened: never run again; a same
call is answered from it), or ``failed`` with ``error_code`` :data:`NOT_EXECUTED` (it did not:
a redo may run it). ``None``, a failure or a timeout leave it ``unknown`` for staff; every
ask is logged (telemetry ``tool.reconcile``) and the resolution shows on the run's admin page
(``error_code`` :data:`RECONCILED`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from typing import Any

from helix_django import store, telemetry
from helix_django.errors import RunNotActionableError
from helix_django.models import ToolExecution, ToolExecutionStatus
from helix_django.orm import sync_to_async

logger = logging.getLogger(__name__)

#: How long one ``reconcile(execution)`` may take before the outcome stays unknown (seconds).
RECONCILE_SECONDS = 10.0
#: ``error_code`` of an execution a tool's reconcile found executed.
RECONCILED = "reconciled"
#: ``error_code`` of an execution a tool's reconcile found not executed.
NOT_EXECUTED = "reconciled_not_executed"


@dataclasses.dataclass(frozen=True)
class Reconciled:
    """A tool's answer about an execution whose outcome was unknown.

    ``happened``: whether the side effect took place; ``result``: its JSON result when it did
    (what the model is told, as if the call had returned it).
    """

    happened: bool
    result: Any = None


async def areconcile(tool: Any, execution: ToolExecution) -> bool:
    """Ask ``tool.reconcile(execution)`` about an ``unknown`` execution; return whether it is resolved now.

    ``tool``: the :class:`~helix_django.runtime.tools.Tool` of ``execution.name`` (one
    without ``reconcile`` answers False at once). Never raises for the tool's own failure
    or timeout: the execution stays ``unknown``.
    """
    if tool is None or tool.reconcile is None or execution.status != ToolExecutionStatus.UNKNOWN:
        return False
    outcome = "unknown"
    try:
        answer = await asyncio.wait_for(_ask(tool.reconcile, execution), RECONCILE_SECONDS)
        if isinstance(answer, Reconciled):
            status = ToolExecutionStatus.SUCCEEDED if answer.happened else ToolExecutionStatus.FAILED
            code = RECONCILED if answer.happened else NOT_EXECUTED
            result = answer.result if answer.happened else None
            await store.aresolve_tool_execution(execution.pk, status=status, result=result, error_code=code)
            outcome = "executed" if answer.happened else "not_executed"
    except RunNotActionableError:
        outcome = "resolved_elsewhere"  # staff (or another ask) resolved it meanwhile
    except Exception as exc:  # noqa: BLE001 - the tool's failure leaves the outcome unknown
        outcome = "timeout" if isinstance(exc, TimeoutError) else "error"
        logger.warning("tool %s: reconcile of execution %s failed: %s", tool.name, execution.pk, type(exc).__name__)
    telemetry.emit("tool.reconcile", run_id=execution.run_id, tool=execution.name, outcome=outcome)
    return outcome != "unknown" and outcome not in ("timeout", "error")


async def _ask(reconcile: Any, execution: ToolExecution) -> Any:
    if inspect.iscoroutinefunction(reconcile):
        return await reconcile(execution)
    return await sync_to_async(reconcile)(execution)


async def areconcile_all(executions: list[ToolExecution], tools_of: Any) -> int:
    """Ask each ``unknown`` execution's tool in turn; return how many were resolved.

    ``tools_of(execution)``: the execution's Tool, or None (its agent or tool is gone).
    """
    resolved = 0
    for execution in executions:
        resolved += await areconcile(tools_of(execution), execution)
    return resolved
