"""Run one function in several threads released together (race tests on a real database)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

THREADS = 6


def race(fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` in THREADS threads released together; return each result or exception."""
    barrier = threading.Barrier(THREADS)
    results: list[Any] = [None] * THREADS

    def target(i: int) -> None:
        try:
            barrier.wait(10)
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results
