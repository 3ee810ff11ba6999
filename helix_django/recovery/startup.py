"""Run the relaunch scan when an ASGI process starts, without queries in ``AppConfig.ready()``.

Wrap the site's ASGI application::

    from helix_django.recovery.startup import RecoveryOnStartup
    application = RecoveryOnStartup(ProtocolTypeRouter({...}))

On the first ASGI call of the process (a lifespan ``startup`` event where the server sends
one, else the first HTTP/WebSocket connection), a background task runs the scan once, then
again every ``HELIX["LEASE_SECONDS"]`` while the process lives, because the leases of a
dead process expire only after that long. The scan never delays the request that
triggered it, and a failing scan is logged, never raised into a request. Daphne sends no
lifespan events, which is why the first connection is the fallback trigger.

Importable before ``django.setup()`` (an ``asgi.py`` may import it first): the scan, which
needs the models, is imported when the first call starts it.

The scan re-attaches runs whose durable provider operation outlived their process
(:mod:`helix_django.recovery.handover`): that needs the runtime's executor, and recovery
sits below the runtime and never imports it. The executor therefore comes from above:
``executor=`` (an executor, or a callable returning one, called when the first scan
starts), else the app config at the top floor
(:meth:`helix_django.apps.HelixConfig.run_executor`), so every site wrapping its
application gets re-attach without wiring it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.apps import apps

from helix_django.conf import helix_settings
from helix_django.deadlines import cancel_requested, ends_when_cancelled

logger = logging.getLogger(__name__)


class RecoveryOnStartup:
    """ASGI middleware that schedules the periodic relaunch scan on the first call of the process."""

    def __init__(self, app: Any, *, interval_seconds: float | None = None, executor: Any = None) -> None:
        self.app = app
        self.interval_seconds = interval_seconds
        self.executor = executor
        """What re-attaches runs (module docstring): an executor, a callable returning one, or None (the app's)."""
        self.task: asyncio.Task | None = None
        """The background scan task (None until the first ASGI call)."""
        self.scans = 0
        """Scans completed by this process."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(ends_when_cancelled(self._loop))
        if scope.get("type") == "lifespan":
            return await self._lifespan(receive, send)
        return await self.app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.task is not None:
                    self.task.cancel()  # and wait (bounded) so the scan has ended when shutdown completes
                    await asyncio.wait({self.task}, timeout=5)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _loop(self) -> None:
        # Django's app loading: asgi.py may import this module before django.setup(), and
        # the scan imports the models.
        from helix_django.recovery.scan import arecover

        executor = self.executor or getattr(apps.get_app_config("helix_django"), "run_executor", None)
        if callable(executor) and not hasattr(executor, "reattach"):
            executor = executor()
        while True:
            try:
                report = await arecover(executor=executor)
                self.scans += 1
                if report.decisions:
                    logger.info("helix relaunch scan: %s", report.counts)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a scan failure must never reach a request
                if cancel_requested():  # a library turned our cancel into its own error
                    raise asyncio.CancelledError from exc
                logger.exception("helix relaunch scan failed")
            await asyncio.sleep(self.interval_seconds or helix_settings.LEASE_SECONDS)
