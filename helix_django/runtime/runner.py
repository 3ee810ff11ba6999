"""The executor's own event loop thread, where every run of a LocalExecutor executes.

A run must never depend on the request that started it (002, "A client that
disconnects"). Entry points may be awaited from any event loop: an ASGI request's, a
test's, or the short-lived loop ``async_to_sync`` creates for an admin view or a
management command, which cancels its leftover tasks when it ends. So a run's task
lives on this long-lived loop of the same process, and callers only wait for its start.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class RunnerLoop:
    """A daemon thread running one asyncio loop, started on first use."""

    def __init__(self, name: str = "helix-runs") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started if needed)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                self._thread = threading.Thread(target=self._run, args=(loop, ready), name=self.name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the runner loop and return its result.

        Shielded: if the caller is cancelled (its client went away), ``coro`` still
        finishes, so a run-start commit is always followed by its claim.
        """
        loop = self.loop
        if asyncio.get_running_loop() is loop:
            return await coro
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def run() -> None:
            try:
                future.set_result(await coro)
            except BaseException as exc:
                future.set_exception(exc)

        # A fresh context: the caller's context variables (asgiref's executor of an
        # async_to_sync call that ends soon, a request's state) must not leak into the run.
        loop.call_soon_threadsafe(lambda: loop.create_task(run()), context=contextvars.Context())
        return await asyncio.shield(asyncio.wrap_future(future))

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every task on the loop (runs are abandoned, not ended), stop it and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or loop.is_closed():
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout)
            if not loop.is_running():
                loop.close()
