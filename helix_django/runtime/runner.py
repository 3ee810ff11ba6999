"""Where the runs of a LocalExecutor execute: the ASGI server's loop, or the executor's own loop thread.

A run must never depend on the request that started it (002, "A client that
disconnects"). Entry points may be awaited from any event loop: an ASGI server's, a
test's, or the short-lived loop ``async_to_sync`` creates for an admin view or a
management command, which cancels its leftover tasks when it ends. A run's task
therefore lives on a loop that lasts as long as the process:

- the caller's own loop when it runs in the process's main thread: the loop of the ASGI
  server (daphne, uvicorn, hypercorn run it there). The run's task is separate from the
  request's, and the run shares the loop cooperatively with the requests that read it
  (no hand-over between threads before the first byte: docs/performance.md);
- otherwise this module's loop thread, started on first use.
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

    @staticmethod
    def running_loop_lives_with_process() -> bool:
        """Whether runs may live on the running loop: True in the main thread (an ASGI server's loop).

        A loop ``async_to_sync`` creates runs in a worker thread. A main-thread loop that
        ends early (``asyncio.run`` in a script) takes its runs with it, as the process
        would: such a caller awaits ``executor.wait(run_id)`` first.
        """
        return threading.current_thread() is threading.main_thread()

    async def call(self, coro: Coroutine[Any, Any, T], *, shielded: bool = False) -> T:
        """Run ``coro`` (a run's start; it creates the run's task) where runs live and return its result.

        In a task of its own, shielded: if the caller is cancelled (its client went away),
        ``coro`` still finishes, so a run-start commit is always followed by its claim.
        A fresh context: the caller's context variables (asgiref's executor of an
        ``async_to_sync`` call that ends soon, a request's state) must not leak into the run
        (the run's own tasks start in a fresh context too: :func:`start_task`).
        ``shielded``: the caller runs in a task no cancel reaches before this returns (the
        chat route's admitting task): on the loop where runs live ``coro`` is awaited in
        it, without a task and the loop rounds a task costs before the first byte.
        """
        running = asyncio.get_running_loop()
        if running is self._loop:
            return await coro
        if self.running_loop_lives_with_process():
            if shielded:
                return await coro
            return await asyncio.shield(running.create_task(coro, context=contextvars.Context()))
        loop = self.loop
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def run() -> None:
            try:
                future.set_result(await coro)
            except BaseException as exc:
                future.set_exception(exc)

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


def start_task(coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """Start ``coro`` as a task of the running loop in a fresh context (a run's task, its announcement).

    The task sees none of its starter's context variables (a request's translation or
    urlconf, asgiref's executor of an ``async_to_sync`` call that ends soon), wherever it
    was started from (:meth:`RunnerLoop.call`). ``Context.run`` keeps Python 3.10, whose
    ``create_task`` takes no ``context``.
    """
    return contextvars.Context().run(asyncio.get_running_loop().create_task, coro, name=name)
