"""The launcher contract: where a run executes once it opened (its run-start commit, its stream claim).

Shaped as django-tasks shapes its task backends: an abstract base holding the whole
contract, capability flags, ``check()`` per backend, loaded from
``HELIX["LAUNCHER"] = {"BACKEND": <dotted path>, "OPTIONS": {...}}``
(:func:`helix_django.runtime.launchers.load_launcher`).
"""

from __future__ import annotations

import abc
from typing import Any

from django.core.checks import CheckMessage

from helix_django.models import Run
from helix_django.runtime.agent import RunLoop
from helix_django.runtime.handles import Entry, Launch, RunHandle
from helix_django.runtime.local_runs import LocalRuns


class BaseLauncher(abc.ABC):
    """Where runs execute: in this process, or on workers the run is handed to."""

    executes_at_once: bool = True
    """The run's task starts with its commit, which writes it ``streaming`` and reads its conversation."""

    lease_owner_kind: str = ""
    """The kind of lease owner id a run-start commit records (:func:`helix_django.processes.lease_owner_id`)."""

    supports_request_key: bool = True
    """Keyed sends are honoured (002, "Where it is honoured")."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        """The ``OPTIONS`` of ``HELIX["LAUNCHER"]``."""

    def check(self) -> list[CheckMessage]:
        """Return Django check messages about this launcher's configuration (none by default)."""
        return []

    @abc.abstractmethod
    async def dispatch(self, runs: LocalRuns, entry: Entry, loop: RunLoop) -> None:
        """Hand an opened run (its opening chunks stored) to what executes it; called where runs live."""

    async def launched(self, runs: LocalRuns, handle: RunHandle, launch: Launch, user: Any, owner: str) -> RunHandle:
        """After the run opened, back on the caller's loop: what the launcher still does; return ``handle``."""
        return handle

    def is_queued(self, run: Run, owner: str) -> bool:
        """Whether a live ``run`` with no local task is waiting for a worker (not dead); False here."""
        return False
