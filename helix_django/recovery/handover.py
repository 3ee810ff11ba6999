"""Hand a run whose durable operation outlived its process to an executor that goes on with it (re-attach).

000, "Resume, continue, regenerate, and reconcile are different": a run whose provider
operation still runs (or completed asking for tools) is not over. Recovery sits below the
runtime and never imports it: the executor comes from the caller (``executor=`` of
:func:`~helix_django.recovery.scan.arecover`; the callers on the runtime's floor or above
pass the runtime's ``get_executor()``), as the recovery actions receive theirs
(:class:`~helix_django.recovery.actions.RunStarter`). The run is ``recovering`` while this
decides and hands it over; the executor then runs it as the same run
(:mod:`helix_django.runtime.reattach`).
"""

from __future__ import annotations

from typing import Any, Protocol

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.models import Run, RunStatus


class Reattacher(Protocol):
    """What the scan needs of an executor to go on with a run (the runtime's ``Executor``)."""

    async def reattach(self, run_id: str) -> bool:
        """Go on with the ``recovering`` run ``run_id`` as the same run; True once it executes, False when it cannot."""

    async def reconcile_tools(self, run_id: str) -> int:
        """Ask the tools of ``run_id``'s unknown side-effecting executions to settle them; return how many did."""

    async def start_queued(self) -> int:
        """Start the queued messages of sessions without a live run; return how many started."""


def reattach_reason(result: Any) -> str:
    """Return the scan decision's reason when the run of ``result`` may go on as the same run, else ``""``.

    ``result``: the provider's answer on the operation (``status``, ``tool_calls``; None when
    unavailable). ``provider_in_progress`` for an operation still running, when the site
    waits for running operations (``OPERATION_WAIT_SECONDS`` above 0);
    ``provider_requested_tools`` for one that completed asking for tools.
    """
    if result is None:
        return ""
    if result.status == "in_progress" and helix_settings.OPERATION_WAIT_SECONDS > 0:
        return "provider_in_progress"
    if result.status == "completed" and result.tool_calls:
        return "provider_requested_tools"
    return ""


async def ahand_over(run: Run, executor: Reattacher, owner: str) -> bool:
    """Move ``run`` to ``recovering`` under ``owner``'s lease (the scan's) and hand it to ``executor``.

    True when the executor took it (the run is then ``streaming`` under its lease). False
    when the run changed meanwhile or the executor cannot take it: the run is left
    ``recovering`` under ``owner``'s lease when it got there, for the caller's next step.
    Raises what the executor raises (StreamConnectionError).
    """
    if not await amove_to_recovering(run, owner):
        return False
    return await executor.reattach(run.id)


async def amove_to_recovering(run: Run, owner: str) -> bool:
    """Move ``run`` (from its status, or ``recovering`` already) to ``recovering`` under ``owner``'s lease.

    A compare-and-set (``LEASE_SECONDS``): False, writing nothing, when the run changed
    meanwhile; True sets ``run.status`` to ``recovering`` in memory too.
    """
    moved = await store.atransition_run(
        run.id,
        frozenset({run.status, RunStatus.RECOVERING}),
        RunStatus.RECOVERING,
        lease_owner=owner,
        lease_seconds=helix_settings.LEASE_SECONDS,
    )
    if moved:
        run.status = RunStatus.RECOVERING
    return moved
