"""Graceful shutdown of a process executing runs: SIGTERM drains, then ends the rest truthfully.

Every deploy stops a process with SIGTERM. On the first SIGTERM this process

1. stops taking runs: a send (or any start of a run) is refused with 503
   ``transport_server_draining`` (retryable, ``Retry-After``), so the client sends again and
   reaches a process that is not stopping;
2. lets the runs executing here finish, for at most ``HELIX["DRAIN_SECONDS"]``;
3. ends each run still executing ``interrupted``, its partial output kept and its stream
   failed with the typed ``run_interrupted`` error (the relaunch scan's own ending, cause
   ``server_stopped``), so no reader waits for a lease to expire. A run whose provider
   operation is durable (an operation id the provider can be asked about) is left to the
   next process's relaunch scan instead, which asks the provider (000, "Background
   operations are easier to recover than ephemeral streams");
4. hands the signal to the server's own handler (daphne's reactor, uvicorn's graceful
   shutdown), which then stops as it always does. A second SIGTERM stops at once.

The handler is installed from the server's main thread, once the first run opened there
(signal handlers can only be set from the main thread, and servers set their own before
they serve). ``DRAIN_SECONDS`` of 0 installs nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import threading
from typing import Any, Protocol

from helix_django.conf import helix_settings
from helix_django.models import Run
from helix_django.recovery.provider import provider_for
from helix_django.recovery.scan import arecover_run

logger = logging.getLogger(__name__)


class DrainableRuns(Protocol):
    """The runs of this process a drain waits for (:class:`~helix_django.runtime.local_runs.LocalRuns`)."""

    def local_runs(self) -> dict[str, concurrent.futures.Future[str]]:
        """Return ``{run_id: future of its ending status}`` of the runs executing here now."""


_draining = threading.Event()
_installed = False


def is_draining() -> bool:
    """Whether this process received SIGTERM and takes no new runs."""
    return _draining.is_set()


def install(executor: DrainableRuns) -> None:
    """Install the SIGTERM handler once, if called on the main thread inside its running event loop.

    ``executor``: the runs drained (its ``local_runs()``; an executor or its ``runs``).
    """
    global _installed  # noqa: PLW0603 - one handler per process
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    seconds = float(helix_settings.DRAIN_SECONDS or 0)
    if seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        if _draining.is_set() or loop.is_closed():
            _hand_over(previous, signum, frame)
            return
        _draining.set()
        logger.info("SIGTERM: draining live runs for up to %.0f s", seconds)
        loop.create_task(_drain_then_stop(executor, seconds, previous, signum))

    signal.signal(signal.SIGTERM, on_sigterm)
    _installed = True


def _hand_over(previous: Any, signum: int, frame: Any) -> None:
    """Call the handler the server had installed (or the default action: end the process)."""
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.raise_signal(signal.SIGTERM)


async def _drain_then_stop(executor: DrainableRuns, seconds: float, previous: Any, signum: int) -> None:
    try:
        await adrain(executor, seconds)
    except Exception:  # noqa: BLE001 - the server must stop whatever the drain met
        logger.exception("draining live runs failed")
    finally:
        _hand_over(previous, signum, None)


async def adrain(executor: DrainableRuns, seconds: float) -> list[str]:
    """Wait up to ``seconds`` for ``executor``'s local runs to end, then end the rest; return the ids ended here.

    Raises nothing for one run that cannot be ended (logged): the others are still ended.
    """
    live = executor.local_runs()
    if live:
        await asyncio.wait([asyncio.wrap_future(done) for done in live.values()], timeout=seconds)
    ended = []
    for run_id in executor.local_runs():
        try:
            if await _end_interrupted(run_id):
                ended.append(run_id)
        except Exception:  # noqa: BLE001 - one run must not keep the others live
            logger.exception("could not end run %s at shutdown", run_id)
    return ended


async def _end_interrupted(run_id: str) -> bool:
    """End a run still executing at the drain's end as the relaunch scan would; False when it is left to it."""
    run = await Run.objects.filter(pk=run_id).afirst()
    if run is None or not run.is_live:
        return False
    if run.provider_operation_id and getattr(provider_for(run), "supports_retrieve", False):
        return False  # durable: the next process's scan asks the provider
    decision = await arecover_run(run_id, force=True, query_provider=False, cause="server_stopped")
    return decision.outcome != "skipped"
